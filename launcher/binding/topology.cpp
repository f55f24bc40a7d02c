#include "fastrun/launcher/binding/topology.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <hwloc.h>

#include "fastrun/runtime/error.h"

namespace fastrun::launcher {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// hwloc's plugins (Debian's: OpenCL, GL, PCI, libxml) describe I/O devices, which the binding
// does not read (GPU locality comes from sysfs), and loading them (the OpenCL and X libraries)
// took ~40 ms of a 42 ms load here, against ~1.3 ms for the topology alone. hwloc loads them when
// the first topology is initialised, from the folders of HWLOC_PLUGINS_PATH: unless the user set
// it, it names no folder for that call. The launcher has no other thread yet (cli_main's step 1;
// launch_self is called before threads), so no getenv elsewhere races this.
class NoHwlocPlugins {
 public:
  NoHwlocPlugins() : set_(std::getenv("HWLOC_PLUGINS_PATH") == nullptr) {
    if (set_) ::setenv("HWLOC_PLUGINS_PATH", "", 1);
  }
  ~NoHwlocPlugins() {
    if (set_) ::unsetenv("HWLOC_PLUGINS_PATH");
  }
  NoHwlocPlugins(const NoHwlocPlugins&) = delete;
  NoHwlocPlugins& operator=(const NoHwlocPlugins&) = delete;

 private:
  bool set_;
};

Topology load(const TopologySource& source) {
  hwloc_topology_t raw = nullptr;
  {
    const NoHwlocPlugins no_plugins;
    if (hwloc_topology_init(&raw) != 0) throw_errno("hwloc_topology_init", errno);
  }
  Topology topo(raw);
  // Only NUMA nodes, cores and PUs are read (Groups stay: a NUMA node's CPUs are its parent's,
  // which may be a Group). The x86 backend runs cpuid on every PU in
  // turn (binding this thread to each): the Linux backend's sysfs gives the same cores, 3x faster.
  hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  hwloc_topology_set_cache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_MISC, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_NO_DISTANCES | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS |
                                    HWLOC_TOPOLOGY_FLAG_NO_CPUKINDS);
  std::string what = "this machine";
  if (!source.synthetic.empty()) {
    what = fmt::format("the synthetic topology '{}'", source.synthetic);
    if (hwloc_topology_set_synthetic(raw, source.synthetic.c_str()) != 0)
      throw ConfigError(fmt::format("hwloc cannot read {}: see hwloc's synthetic topology syntax", what));
  } else if (!source.xml_path.empty()) {
    what = fmt::format("the XML topology {}", source.xml_path);
    if (hwloc_topology_set_xml(raw, source.xml_path.c_str()) != 0) throw_errno(fmt::format("hwloc: {}", what), errno);
  }
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(raw) != 0) throw_errno(fmt::format("hwloc_topology_load ({})", what), errno);
  return topo;
}

}  // namespace

MachineLayout load_machine_layout(const TopologySource& source, const std::optional<std::vector<int>>& allowed) {
  const Topology topo = load(source);
  hwloc_topology_t t = topo.get();
  MachineLayout layout;
  const int nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  const int cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  for (int i = 0; i < nodes; ++i) {
    const hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    NumaNode n;
    n.os_index = static_cast<int>(node->os_index);
    for (int c = 0; c < cores; ++c) {
      const hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(c));
      if (!hwloc_bitmap_isincluded(core->cpuset, node->cpuset)) continue;
      std::vector<int> pus;
      int pu = 0;
      hwloc_bitmap_foreach_begin(pu, core->cpuset) {
        const int cpu = pu;
        if (!allowed || std::binary_search(allowed->begin(), allowed->end(), cpu)) pus.push_back(cpu);
      }
      hwloc_bitmap_foreach_end();
      if (!pus.empty()) n.cores.push_back(std::move(pus));
    }
    layout.nodes.push_back(std::move(n));
  }
  return layout;
}

std::vector<int> own_affinity() {
  // A set of 8192 CPUs: more than any machine fastrun meets; the kernel says EINVAL if smaller.
  constexpr int kMaxCpus = 8192;
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  const std::size_t bytes = CPU_ALLOC_SIZE(kMaxCpus);
  CPU_ZERO_S(bytes, set);
  std::vector<int> out;
  if (::sched_getaffinity(0, bytes, set) == 0) {
    for (int c = 0; c < kMaxCpus; ++c)
      if (CPU_ISSET_S(static_cast<std::size_t>(c), bytes, set)) out.push_back(c);
  }
  const int err = errno;
  CPU_FREE(set);
  if (out.empty()) throw_errno("sched_getaffinity", err);
  return out;
}

}  // namespace fastrun::launcher

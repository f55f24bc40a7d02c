#include "fastrun/launcher/binding/topology.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <hwloc.h>

#include "fastrun/runtime/error.h"

namespace fastrun::launcher {
namespace {

// hwloc's library, opened the first time a topology is needed (--bind numa|core,
// --report-bindings) rather than linked: the default --bind none never reads one, and loading
// libhwloc and the libudev it brings cost every start of the command ~0.15 ms (docs/launching.md,
// "Joining"). The functions the binding calls, by their hwloc.h types; hwloc.h's inline helpers
// are not used, since they would call hwloc's library directly.
struct Hwloc {
  decltype(&hwloc_get_api_version) get_api_version;
  decltype(&hwloc_topology_init) topology_init;
  decltype(&hwloc_topology_destroy) topology_destroy;
  decltype(&hwloc_topology_load) topology_load;
  decltype(&hwloc_topology_set_components) topology_set_components;
  decltype(&hwloc_topology_set_cache_types_filter) topology_set_cache_types_filter;
  decltype(&hwloc_topology_set_icache_types_filter) topology_set_icache_types_filter;
  decltype(&hwloc_topology_set_io_types_filter) topology_set_io_types_filter;
  decltype(&hwloc_topology_set_type_filter) topology_set_type_filter;
  decltype(&hwloc_topology_set_flags) topology_set_flags;
  decltype(&hwloc_topology_set_synthetic) topology_set_synthetic;
  decltype(&hwloc_topology_set_xml) topology_set_xml;
  decltype(&hwloc_get_type_depth) get_type_depth;
  decltype(&hwloc_get_nbobjs_by_depth) get_nbobjs_by_depth;
  decltype(&hwloc_get_obj_by_depth) get_obj_by_depth;
  decltype(&hwloc_bitmap_isincluded) bitmap_isincluded;
  decltype(&hwloc_bitmap_first) bitmap_first;
  decltype(&hwloc_bitmap_next) bitmap_next;
};

// hwloc 2.x keeps one ABI, libhwloc.so.15 (Debian: libhwloc15); the API version it reports must
// share this build's major number.
constexpr const char* kHwlocLibrary = "libhwloc.so.15";

// A library that is missing or of another hwloc is this machine's set-up, which the user can
// mend or avoid: a usage error before anything starts, like a bad flag, ending in this.
constexpr const char* kHwlocRemedy = "(Debian: apt-get install libhwloc15), or run with --bind none";

template <typename F>
void resolve(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
  if (!f)
    throw ConfigError(fmt::format("{} has no {}: not the hwloc 2 library this fastrun was built for {}", kHwlocLibrary,
                                  name, kHwlocRemedy));
}

Hwloc open_hwloc() {
  void* lib = ::dlopen(kHwlocLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    throw ConfigError(fmt::format("--bind and --report-bindings read the CPU topology with hwloc, whose library could "
                                  "not be loaded: {} {}",
                                  ::dlerror(), kHwlocRemedy));
  Hwloc h{};
  resolve(lib, h.get_api_version, "hwloc_get_api_version");
  resolve(lib, h.topology_init, "hwloc_topology_init");
  resolve(lib, h.topology_destroy, "hwloc_topology_destroy");
  resolve(lib, h.topology_load, "hwloc_topology_load");
  resolve(lib, h.topology_set_components, "hwloc_topology_set_components");
  resolve(lib, h.topology_set_cache_types_filter, "hwloc_topology_set_cache_types_filter");
  resolve(lib, h.topology_set_icache_types_filter, "hwloc_topology_set_icache_types_filter");
  resolve(lib, h.topology_set_io_types_filter, "hwloc_topology_set_io_types_filter");
  resolve(lib, h.topology_set_type_filter, "hwloc_topology_set_type_filter");
  resolve(lib, h.topology_set_flags, "hwloc_topology_set_flags");
  resolve(lib, h.topology_set_synthetic, "hwloc_topology_set_synthetic");
  resolve(lib, h.topology_set_xml, "hwloc_topology_set_xml");
  resolve(lib, h.get_type_depth, "hwloc_get_type_depth");
  resolve(lib, h.get_nbobjs_by_depth, "hwloc_get_nbobjs_by_depth");
  resolve(lib, h.get_obj_by_depth, "hwloc_get_obj_by_depth");
  resolve(lib, h.bitmap_isincluded, "hwloc_bitmap_isincluded");
  resolve(lib, h.bitmap_first, "hwloc_bitmap_first");
  resolve(lib, h.bitmap_next, "hwloc_bitmap_next");
  const unsigned version = h.get_api_version();
  if ((version >> 16) != (HWLOC_API_VERSION >> 16))
    throw ConfigError(fmt::format("{} has hwloc API {:#x}; this fastrun was built for {:#x} {}", kHwlocLibrary, version,
                                  static_cast<unsigned>(HWLOC_API_VERSION), kHwlocRemedy));
  return h;  // the library stays loaded for the process
}

// Opened once, on first use; a failure is thrown again to every caller.
const Hwloc& hwloc() {
  static const Hwloc h = open_hwloc();
  return h;
}

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc().topology_destroy(t); }
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
  const Hwloc& h = hwloc();
  hwloc_topology_t raw = nullptr;
  {
    const NoHwlocPlugins no_plugins;
    if (h.topology_init(&raw) != 0) throw_errno("hwloc_topology_init", errno);
  }
  Topology topo(raw);
  // Only NUMA nodes, cores and PUs are read (Groups stay: a NUMA node's CPUs are its parent's,
  // which may be a Group). The x86 backend runs cpuid on every PU in
  // turn (binding this thread to each): the Linux backend's sysfs gives the same cores, 3x faster.
  h.topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  h.topology_set_cache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  h.topology_set_icache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  h.topology_set_type_filter(raw, HWLOC_OBJ_MISC, HWLOC_TYPE_FILTER_KEEP_NONE);
  h.topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_NO_DISTANCES | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS |
                                HWLOC_TOPOLOGY_FLAG_NO_CPUKINDS);
  std::string what = "this machine";
  if (!source.synthetic.empty()) {
    what = fmt::format("the synthetic topology '{}'", source.synthetic);
    if (h.topology_set_synthetic(raw, source.synthetic.c_str()) != 0)
      throw ConfigError(fmt::format("hwloc cannot read {}: see hwloc's synthetic topology syntax", what));
  } else if (!source.xml_path.empty()) {
    what = fmt::format("the XML topology {}", source.xml_path);
    if (h.topology_set_xml(raw, source.xml_path.c_str()) != 0) throw_errno(fmt::format("hwloc: {}", what), errno);
  }
  h.topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (h.topology_load(raw) != 0) throw_errno(fmt::format("hwloc_topology_load ({})", what), errno);
  return topo;
}

}  // namespace

MachineLayout load_machine_layout(const TopologySource& source, const std::optional<std::vector<int>>& allowed) {
  const Topology topo = load(source);
  const Hwloc& h = hwloc();
  hwloc_topology_t t = topo.get();
  MachineLayout layout;
  // hwloc_get_nbobjs_by_type / _obj_by_type, by depth: NUMA nodes have a virtual depth of their
  // own; a type absent (UNKNOWN) or on several levels (MULTIPLE) has no objects to list.
  const int node_depth = h.get_type_depth(t, HWLOC_OBJ_NUMANODE);
  const int core_depth = h.get_type_depth(t, HWLOC_OBJ_CORE);
  const auto count = [&](int depth) {
    return depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE
               ? 0
               : static_cast<int>(h.get_nbobjs_by_depth(t, depth));
  };
  const int nodes = count(node_depth);
  const int cores = count(core_depth);
  for (int i = 0; i < nodes; ++i) {
    const hwloc_obj_t node = h.get_obj_by_depth(t, node_depth, static_cast<unsigned>(i));
    NumaNode n;
    n.os_index = static_cast<int>(node->os_index);
    for (int c = 0; c < cores; ++c) {
      const hwloc_obj_t core = h.get_obj_by_depth(t, core_depth, static_cast<unsigned>(c));
      if (!h.bitmap_isincluded(core->cpuset, node->cpuset)) continue;
      std::vector<int> pus;
      for (int pu = h.bitmap_first(core->cpuset); pu >= 0; pu = h.bitmap_next(core->cpuset, pu))
        if (!allowed || std::binary_search(allowed->begin(), allowed->end(), pu)) pus.push_back(pu);
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

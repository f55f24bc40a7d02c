#pragma once
// Which CPUs and memory each local rank is bound to (docs/binding.md): a pure planner over plain
// data, so that a 2-socket, 8-GPU machine is tested on any machine
// (tests/launcher/binding_plan_test.cpp). The machine's side comes from hwloc (topology.h), the
// GPUs' side from sysfs (gpu_locality.h); this file knows neither.
//
// Rules:
//  1. none: nothing is bound; the plan is empty.
//  2. A rank's home NUMA node: its GPU's node (sysfs numa_node) when it has a GPU; without GPUs
//     (--nproc), local ranks fill the nodes in blocks, in node order (ranks 0..k-1 on the first
//     node, ...), so that neighbouring ranks, which talk most in a ring, share a socket.
//  3. numa: the rank gets every allowed CPU of its home node, and its memory prefers that node.
//  4. core: the ranks that share a home node split its allowed cores into disjoint contiguous
//     blocks, in local-rank order (a core's hyperthreads stay together); the first ranks get one
//     core more when the cores do not divide evenly. More ranks than cores: ranks share cores
//     round-robin (one core each), which the report shows.
//  5. A GPU whose firmware gives no NUMA node (numa_node -1, common on one-socket machines):
//     numa binds to its local_cpulist (without a memory policy); core splits the whole machine.
//  6. "Allowed" is the launcher's own affinity (taskset, a cgroup's cpuset): nothing outside it is
//     handed out. A home node with no allowed CPU is a ConfigError naming the node and the CPUs.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fastrun::launcher {

enum class BindMode { none, numa, core };

// "none" | "numa" | "core"; ConfigError naming `source` (e.g. "--bind" or "FASTRUN_BIND"), the
// value and what is accepted.
BindMode parse_bind_mode(std::string_view value, std::string_view source);
std::string_view bind_mode_name(BindMode mode);

// One NUMA node as the launcher may use it: its cores, each the OS indices of its PUs, all
// within the allowed set (cores with no allowed PU left out).
struct NumaNode {
  int os_index = 0;
  std::vector<std::vector<int>> cores;
};
struct MachineLayout {
  std::vector<NumaNode> nodes;  // in hwloc's logical order
};

// Where a rank's physical GPU sits (gpu_locality.h).
struct GpuLocality {
  std::string device;         // the rank's CUDA_VISIBLE_DEVICES token, e.g. "5"
  std::string pci_bus_id;     // "0000:3b:00.0"
  int numa_node = -1;         // sysfs numa_node; -1: the firmware gives none
  std::vector<int> local_cpus;  // sysfs local_cpulist
};

struct RankBinding {
  int local_rank = 0;
  std::optional<GpuLocality> gpu;
  std::vector<int> cpus;      // sorted OS indices the rank may run on
  int memory_node = -1;       // preferred NUMA node for its memory; -1 = the default policy
  bool shared_cores = false;  // core mode with more ranks than cores on its node
};

// gpus: one entry per local rank with GPUs (rank order), empty for CPU ranks (then
// `local_world` ranks). ConfigError for a GPU on a NUMA node the layout lacks or without allowed
// CPUs, naming the GPU, its PCI address and the node.
std::vector<RankBinding> plan_bindings(BindMode mode, const MachineLayout& layout,
                                       const std::vector<GpuLocality>& gpus, int local_world);

// CPU lists in the kernel's form ("0-3,8,10-11"), as sysfs local_cpulist and
// /proc/self/status Cpus_allowed_list write them. parse: ConfigError naming `what` and the text.
std::vector<int> parse_cpu_list(std::string_view text, std::string_view what);
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace fastrun::launcher

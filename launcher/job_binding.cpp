#include "fastrun/launcher/job_binding.h"

#include <fmt/format.h>

#include "fastrun/launcher/binding/gpu_locality.h"
#include "fastrun/launcher/binding/topology.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"

namespace fastrun::launcher {

JobBinding plan_job_binding(std::optional<BindMode> mode, bool report, const std::optional<DevicePlan>& devices,
                            int local_world) {
  JobBinding b;
  b.mode = mode ? *mode : parse_bind_mode(env::get_string(env::kBind), env::kBind.name);
  b.report = report || env::get_int(env::kReportBindings) == 1;
  if (b.mode == BindMode::none && !b.report) return b;
  // 1. Each rank's physical GPU: its own CUDA_VISIBLE_DEVICES token, never its local rank.
  if (devices) {
    const std::string root = sysfs_root();
    for (const std::string& token : devices->rank_devices) {
      try {
        b.gpus.push_back(gpu_locality(token, root));
      } catch (const ConfigError&) {
        if (b.mode != BindMode::none) throw;
        GpuLocality unknown;  // the report of --bind none shows what it could not find as "-"
        unknown.device = token;
        b.gpus.push_back(unknown);
      }
    }
  }
  if (b.mode == BindMode::none) return b;
  // 2. The machine, as far as the launcher may use it, then the plan.
  const MachineLayout layout = load_machine_layout({}, own_affinity());
  b.ranks = plan_bindings(b.mode, layout, b.gpus, local_world);
  return b;
}

std::string binding_report(const JobBinding& b, int rank_offset, const std::vector<int>& inherited) {
  std::string out = fmt::format("fastrun: bindings (--bind {}; GPU ordinals in PCI bus order)\n", bind_mode_name(b.mode));
  out += fmt::format("  {:<6}{:<7}{:<10}{:<14}{:<6}{:<24}{}\n", "rank", "local", "gpu", "pci", "numa", "cpus",
                     "memory");
  const std::size_t n = b.mode == BindMode::none ? b.gpus.size() : b.ranks.size();
  const std::string inherited_list = format_cpu_list(inherited) + " (inherited)";
  for (std::size_t r = 0; r < std::max<std::size_t>(n, 1); ++r) {
    if (n == 0) {  // CPU ranks, not bound: one line says it for all
      out += fmt::format("  {:<6}{:<7}{:<10}{:<14}{:<6}{:<24}{}\n", "all", "all", "-", "-", "-", inherited_list,
                         "default");
      break;
    }
    const GpuLocality* g = r < b.gpus.size() ? &b.gpus[r] : nullptr;
    const RankBinding* rb = r < b.ranks.size() ? &b.ranks[r] : nullptr;
    const bool found = g && !g->pci_bus_id.empty();
    std::string cpus = rb ? format_cpu_list(rb->cpus) : inherited_list;
    if (rb && rb->shared_cores) cpus += " (shared)";
    out += fmt::format("  {:<6}{:<7}{:<10}{:<14}{:<6}{:<24}{}\n", rank_offset + static_cast<int>(r), r,
                       g ? g->device : "-", found ? g->pci_bus_id : "-",
                       found ? std::to_string(g->numa_node)
                             : rb && rb->memory_node >= 0 ? std::to_string(rb->memory_node) : "-",
                       cpus,
                       rb && rb->memory_node >= 0 ? fmt::format("prefer {}", rb->memory_node) : "default");
  }
  return out;
}

}  // namespace fastrun::launcher

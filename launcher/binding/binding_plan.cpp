#include "fastrun/launcher/binding/binding_plan.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/runtime/text/split.h"

namespace fastrun::launcher {
namespace {

// Cores [first, first + count) of `cores`, flattened to their PUs.
std::vector<int> pus_of(const std::vector<std::vector<int>>& cores, std::size_t first, std::size_t count) {
  std::vector<int> out;
  for (std::size_t c = first; c < first + count; ++c) out.insert(out.end(), cores[c].begin(), cores[c].end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::vector<int>> all_cores(const MachineLayout& layout) {
  std::vector<std::vector<int>> out;
  for (const NumaNode& n : layout.nodes) out.insert(out.end(), n.cores.begin(), n.cores.end());
  return out;
}

// Rule 4: the `members` (indices into `plan`, in local-rank order) split `cores`.
void split_cores(std::vector<RankBinding>& plan, const std::vector<std::size_t>& members,
                 const std::vector<std::vector<int>>& cores) {
  const std::size_t k = members.size();
  const std::size_t c = cores.size();
  for (std::size_t j = 0; j < k; ++j) {
    RankBinding& b = plan[members[j]];
    if (k > c) {
      b.cpus = pus_of(cores, j % c, 1);
      b.shared_cores = true;
    } else {
      // Blocks of c / k cores, the first c % k ranks one more: disjoint and covering every core.
      const std::size_t base = c / k, extra = c % k;
      const std::size_t first = j * base + std::min(j, extra);
      b.cpus = pus_of(cores, first, base + (j < extra ? 1 : 0));
    }
  }
}

std::string describe(const GpuLocality& g) { return fmt::format("GPU {} (PCI {})", g.device, g.pci_bus_id); }

}  // namespace

BindMode parse_bind_mode(std::string_view value, std::string_view source) {
  if (value == "none") return BindMode::none;
  if (value == "numa") return BindMode::numa;
  if (value == "core") return BindMode::core;
  throw ConfigError(fmt::format("{} '{}': accepted values are none (the default: ranks run where the launcher "
                                "may), numa (the CPUs and memory of the GPU's NUMA node), core (cores of that node "
                                "of its own)",
                                source, value));
}

std::string_view bind_mode_name(BindMode mode) {
  switch (mode) {
    case BindMode::none: return "none";
    case BindMode::numa: return "numa";
    case BindMode::core: return "core";
  }
  return "?";
}

std::vector<RankBinding> plan_bindings(BindMode mode, const MachineLayout& layout,
                                       const std::vector<GpuLocality>& gpus, int local_world) {
  if (mode == BindMode::none) return {};  // rule 1
  std::size_t cpu_count = 0;
  for (const NumaNode& n : layout.nodes)
    for (const auto& core : n.cores) cpu_count += core.size();
  if (cpu_count == 0) throw ConfigError("--bind: the launcher may run on no CPU of the machine's topology");
  const int ranks = gpus.empty() ? local_world : static_cast<int>(gpus.size());
  std::vector<RankBinding> plan(static_cast<std::size_t>(ranks));
  // Rule 2: each rank's home, an index into layout.nodes, or -1 (rule 5: the whole machine).
  // CPU ranks fill only the nodes where the launcher may run.
  std::vector<int> usable;
  for (std::size_t i = 0; i < layout.nodes.size(); ++i)
    if (!layout.nodes[i].cores.empty()) usable.push_back(static_cast<int>(i));
  std::vector<int> home(plan.size(), -1);
  for (std::size_t r = 0; r < plan.size(); ++r) {
    plan[r].local_rank = static_cast<int>(r);
    if (gpus.empty()) {
      home[r] = usable[r * usable.size() / plan.size()];
      continue;
    }
    const GpuLocality& g = gpus[r];
    plan[r].gpu = g;
    if (g.numa_node < 0) continue;
    const auto it = std::find_if(layout.nodes.begin(), layout.nodes.end(),
                                 [&](const NumaNode& n) { return n.os_index == g.numa_node; });
    if (it == layout.nodes.end() || it->cores.empty()) {
      std::vector<int> nodes;
      for (const NumaNode& n : layout.nodes)
        if (!n.cores.empty()) nodes.push_back(n.os_index);
      throw ConfigError(fmt::format("--bind {}: local rank {}'s {} is on NUMA node {}, where the launcher may run on no "
                                    "CPU (nodes with allowed CPUs: {}); run fastrun where it may use that node's "
                                    "CPUs, or use --bind none",
                                    bind_mode_name(mode), r, describe(g), g.numa_node, fmt::join(nodes, ",")));
    }
    home[r] = static_cast<int>(it - layout.nodes.begin());
  }
  if (mode == BindMode::numa) {  // rule 3
    for (std::size_t r = 0; r < plan.size(); ++r) {
      if (home[r] >= 0) {
        const NumaNode& n = layout.nodes[static_cast<std::size_t>(home[r])];
        plan[r].cpus = pus_of(n.cores, 0, n.cores.size());
        plan[r].memory_node = n.os_index;
        continue;
      }
      // Rule 5: the GPU's local CPUs that the launcher may use.
      const std::vector<int> allowed = pus_of(all_cores(layout), 0, all_cores(layout).size());
      for (int cpu : plan[r].gpu->local_cpus)
        if (std::binary_search(allowed.begin(), allowed.end(), cpu)) plan[r].cpus.push_back(cpu);
      if (plan[r].cpus.empty()) {
        throw ConfigError(fmt::format("--bind numa: local rank {}'s {} has local CPUs {}, none of which the launcher "
                                      "may run on ({}); use --bind none",
                                      r, describe(*plan[r].gpu), format_cpu_list(plan[r].gpu->local_cpus),
                                      format_cpu_list(allowed)));
      }
    }
    return plan;
  }
  // Rule 4, per home (-1: the whole machine).
  std::map<int, std::vector<std::size_t>> members;
  for (std::size_t r = 0; r < plan.size(); ++r) members[home[r]].push_back(r);
  for (const auto& [h, ranks_here] : members) {
    if (h < 0) {
      split_cores(plan, ranks_here, all_cores(layout));
      continue;
    }
    const NumaNode& n = layout.nodes[static_cast<std::size_t>(h)];
    split_cores(plan, ranks_here, n.cores);
    for (std::size_t r : ranks_here) plan[r].memory_node = n.os_index;
  }
  return plan;
}

std::vector<int> parse_cpu_list(std::string_view list, std::string_view what) {
  std::vector<int> out;
  auto bad = [&] {
    return ConfigError(fmt::format("{}: '{}' is not a CPU list (accepted: numbers and ranges such as 0-3,8,10-11)",
                                   what, list));
  };
  std::string_view s = list;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  if (s.empty()) return out;
  constexpr std::int64_t kMaxCpu = 1 << 20;
  for (const std::string_view part : text::split(s, ',')) {
    const auto dash = part.find('-');
    const auto lo = text::to_integer(part.substr(0, dash), 0, kMaxCpu);
    const auto hi = dash == std::string_view::npos ? lo : text::to_integer(part.substr(dash + 1), 0, kMaxCpu);
    if (!lo || !hi || *hi < *lo) throw bad();
    for (auto c = *lo; c <= *hi; ++c) out.push_back(static_cast<int>(c));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace fastrun::launcher

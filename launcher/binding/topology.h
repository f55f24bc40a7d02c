#pragma once
// The machine's NUMA nodes and cores, from hwloc (docs/binding.md), as the planner's plain
// MachineLayout. hwloc stays inside this file's .cpp: no header of fastrun includes it.
#include <optional>
#include <string>
#include <vector>

#include "fastrun/launcher/binding/binding_plan.h"

namespace fastrun::launcher {

// Where the topology comes from: this machine (both empty), an hwloc synthetic description
// ("pack:2 numa:1 core:8 pu:2": a 2-socket machine of 32 PUs, for tests) or an hwloc XML file.
struct TopologySource {
  std::string synthetic;
  std::string xml_path;
};

// The layout of the nodes and cores, keeping only the PUs in `allowed` (nullopt: all of them).
// Throws Error when hwloc cannot load the topology (naming the source and why).
MachineLayout load_machine_layout(const TopologySource& source, const std::optional<std::vector<int>>& allowed);

// The CPUs this process may run on (sched_getaffinity), sorted.
std::vector<int> own_affinity();

}  // namespace fastrun::launcher

#pragma once
// The job's binding (docs/binding.md): --bind / FASTRUN_BIND resolved, each local rank's GPU
// located and the plan made before any rank starts, and the --report-bindings table.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "fastrun/launcher/binding/binding_plan.h"
#include "fastrun/launcher/device_plan.h"

namespace fastrun::launcher {

struct JobBinding {
  BindMode mode = BindMode::none;
  bool report = false;
  std::vector<RankBinding> ranks;  // one per local rank; empty for none
  std::vector<GpuLocality> gpus;   // with --devices: each rank's GPU as far as it was found (report)
};

// mode: --bind (nullopt: FASTRUN_BIND, default none); report: --report-bindings or
// FASTRUN_REPORT_BINDINGS=1. With a mode other than none every GPU must be found (ConfigError
// naming it otherwise); with none nothing is read unless the report asks for the GPUs' places.
JobBinding plan_job_binding(std::optional<BindMode> mode, bool report, const std::optional<DevicePlan>& devices,
                            int local_world);

// The --report-bindings table, one line per local rank (global rank = rank_offset + local):
// rank, local rank, the physical GPU and its PCI address, NUMA node, the CPUs it may run on and
// its memory policy. `inherited` is the launcher's own affinity, what a rank of --bind none gets.
std::string binding_report(const JobBinding& binding, int rank_offset, const std::vector<int>& inherited);

}  // namespace fastrun::launcher

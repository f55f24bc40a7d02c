#pragma once
// Where a physical GPU sits (docs/binding.md): its PCI address, NUMA node and local CPUs, read
// from sysfs without NVML or a CUDA context.
//
// GPU ordinals are taken in PCI bus order: the order of nvidia-smi and NVML, and CUDA's when
// CUDA_DEVICE_ORDER=PCI_BUS_ID. CUDA's default order (FASTEST_FIRST) is the same on a machine
// of identical GPUs (ties go by PCI bus id); on a mixed machine set CUDA_DEVICE_ORDER=PCI_BUS_ID
// so that the ranks' ordinals mean what the binding assumed (the launcher passes it on as is).
//
// The GPUs are the directories of <root>/proc/driver/nvidia/gpus (named by PCI address), else
// the display-class devices of <root>/sys/bus/pci/drivers/nvidia (NVSwitches, class 0x068000,
// are bound to the same driver and left out). GPU-<uuid> tokens are found through the
// "GPU UUID:" line of <root>/proc/driver/nvidia/gpus/<address>/information.
#include <string>
#include <vector>

#include "fastrun/launcher/binding/binding_plan.h"

namespace fastrun::launcher {

// The folder standing in for / when reading /sys and /proc/driver/nvidia: FASTRUN_SYSFS_ROOT
// (test-only, a fake tree), else "" (the real files).
std::string sysfs_root();

// The NVIDIA GPUs' PCI addresses ("0000:3b:00.0"), in PCI bus order.
std::vector<std::string> nvidia_gpu_bus_ids(const std::string& root);

// The locality of the GPU a rank's CUDA_VISIBLE_DEVICES token names (an ordinal or GPU-<uuid>).
// ConfigError naming the token, where it was looked for and what was found there: an ordinal
// past the GPUs listed, an unknown or MIG uuid, unreadable numa_node / local_cpulist.
GpuLocality gpu_locality(const std::string& token, const std::string& root);

}  // namespace fastrun::launcher

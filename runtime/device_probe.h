#pragma once
// How the runtime learns a rank's device without linking CUDA: the CUDA/NCCL component
// (fastrun::nccl, runtime/backend/nccl/component.cpp) installs a probe when it is loaded; without it
// every rank is a CPU rank. Internal header.
//
// Threading: install at load time (static initialisation); probe from any thread afterwards.
#include <string>

namespace fastrun {

// Returns "cpu", or the PCI bus id of CUDA device 0 (the launcher pins one device per rank).
using DeviceIdentityProbe = std::string (*)();

void install_device_identity_probe(DeviceIdentityProbe probe) noexcept;
std::string probe_device_identity();

}  // namespace fastrun

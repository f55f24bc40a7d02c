#pragma once
// DDP's device-memory hooks (runtime/cuda/ddp_device_ops.cpp). Declared here, beside their
// definition, so that the component that installs them (runtime/backend/nccl/component.cpp)
// depends on runtime/cuda and not the reverse. Internal header.

namespace fastrun::ddp {

// Installs the hooks into runtime/ddp/buffer_ops.h; function pointers only, no CUDA call.
void install_cuda_device_ops();

}  // namespace fastrun::ddp

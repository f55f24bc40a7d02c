#pragma once
// The CUDA/NCCL component (libfastrun_nccl, target fastrun::nccl): what it plugs into the
// runtime, all through one entry point so that linking the component is all a program does.
// Internal header.

extern "C" {
// Registers the nccl backend, installs DDP's device-memory hooks and the device probe; runs
// once (later calls return at once). Called when the library loads, and by the object that
// fastrun::nccl compiles into each program (cmake/fastrun_nccl_link.cpp): that reference keeps
// the library a dependency under --as-needed and pulls it out of a static archive. Never
// touches CUDA itself, so CUDA_VISIBLE_DEVICES is still read at the rank's first CUDA call.
int fastrun_nccl_component();
}

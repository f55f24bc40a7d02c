#pragma once
// The CPU model of the CUDA runtime (libcudart.so.13 built from tests/cuda_model/cudart/) and of
// NCCL (libnccl.so.2 from tests/cuda_model/nccl/): test-only, never installed, never linked by
// the product. What is modelled and what is not: docs/cuda-model.md.
//
// This header is the model's own interface between its two libraries, and a marker that tests
// look up to know they run against the model (model_loaded()). Symbols under the version node
// FASTRUN_CUDA_MODEL_1 (cudart/libcudart.map); the CUDA API itself is under libcudart.so.13, as
// in the real library, since fastrun's references to it are versioned.
#include <cuda_runtime_api.h>

#include <cstddef>

extern "C" {

// The number of model devices this process sees (FASTRUN_CUDA_MODEL_DEVICES filtered by
// CUDA_VISIBLE_DEVICES). Does not initialise anything: safe before a fork.
int fastrun_cuda_model_devices(void);

// The model's private read-write alias of device memory [ptr, ptr + bytes), which must lie in
// one live allocation; nullptr otherwise. `device` (if not null) receives its device. Only
// device work (functions run by fastrun_cuda_model_enqueue) may touch the alias.
void* fastrun_cuda_model_alias(const void* ptr, std::size_t bytes, int* device);

// Enqueues fn(arg) on `stream` (0 and cudaStreamLegacy: the current device's legacy stream) as
// device work: it runs on the stream's worker thread, in stream order, and may touch aliases.
// Returns cudaErrorInvalidResourceHandle for an unknown stream (fn is then not called).
cudaError_t fastrun_cuda_model_enqueue(cudaStream_t stream, void (*fn)(void*), void* arg);

// The device a stream belongs to (-1 for an unknown stream).
int fastrun_cuda_model_stream_device(cudaStream_t stream);

}  // extern "C"

#pragma once
// Element-wise reductions on host memory, for every DType x ReduceOp, shared by the CPU
// backends. 16-bit floats are widened to float, reduced, and rounded back once per call.
// `avg` is not a kernel: backends reduce with sum, then call divide_in_place (integers use
// integer division, truncating toward zero, as documented in docs/runtime.md).
#include <cstddef>

#include "fastrun/runtime/process_group/types.h"

namespace fastrun::kernels {

// out[i] = a[i] OP b[i] for i < count; out may alias a or b. `op` must not be avg (use sum).
void reduce(DType dtype, ReduceOp op, void* out, const void* a, const void* b, std::size_t count);

// Signature Gloo's setReduceFunction wants (out, in1, in2, n), for a fixed dtype and op.
using ReduceFn = void (*)(void*, const void*, const void*, std::size_t);
ReduceFn reduce_fn(DType dtype, ReduceOp op);

// buffer[i] /= divisor (integer division for int32/int64).
void divide_in_place(DType dtype, void* buffer, std::size_t count, int divisor);

}  // namespace fastrun::kernels

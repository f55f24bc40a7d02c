#pragma once
// N-way element-wise reductions for the shm backend, every DType x ReduceOp.
//
//   dst[i] = srcs[0][i] OP srcs[1][i] OP ... OP srcs[n-1][i]   (avg: the sum divided by n)
//
// Sources are combined in the order given, so every rank that passes the same sources in the
// same order gets bit-identical results. `dst` may be the same pointer as one of the sources (the
// in-place all-reduce reduces the rank's own input into itself); `dst2`, when not null, receives a
// second copy of the result (the slot peers gather from) and must not overlap anything.
// Integers wrap on overflow (computed in unsigned arithmetic); avg on integers truncates toward
// zero. half and bfloat16 are accumulated in float and rounded once.
#include <cstddef>

#include "fastrun/runtime/process_group/types.h"

namespace fastrun::shm {

void reduce(DType dtype, ReduceOp op, void* dst, void* dst2, const void* const* srcs, int nsrc, std::size_t count);

}  // namespace fastrun::shm

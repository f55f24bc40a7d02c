#pragma once
// The one set of element-wise reductions on host memory, every DType x ReduceOp, used by every
// CPU path (the shm backend, the gloo backend, reduce_scatter), so that the bits of a result do
// not depend on which backend `auto` picked:
//
//   dst[i] = srcs[0][i] OP srcs[1][i] OP ... OP srcs[n-1][i]   (avg: that sum divided by n)
//
// Semantics (docs/runtime.md, "Semantics shared by the CPU backends"):
// - Sources are combined left to right in the order given; a backend passes them in group rank
//   order, so the result is one fixed function of the ranks' inputs.
// - float16 and bfloat16 are widened to float, accumulated over all n sources in float (and for
//   avg divided by n in float), and rounded to nearest even once, at the end.
// - Integers wrap on overflow (two's complement, computed in unsigned arithmetic, so there is
//   no undefined behaviour); avg on integers divides the wrapped sum, truncating toward zero.
// - min/max keep the earlier source on ties and when a NaN is compared (`b < a ? b : a`).
//
// `dst` may be the same pointer as one of the sources (an in-place all-reduce reduces the
// rank's own input into itself); `dst2`, when not null, receives a second copy of the result
// (the slot peers gather from) and must not overlap anything. Work goes in blocks of 1024
// elements accumulated on the stack, which is what makes dst == source safe and what lets the
// inner loops vectorise.
#include <cstddef>

#include "fastrun/runtime/process_group/types.h"

namespace fastrun::kernels {

void reduce(DType dtype, ReduceOp op, void* dst, void* dst2, const void* const* srcs, int nsrc, std::size_t count);

// data[i] = data[i] / n: avg's last step, for a sum that was folded in pieces (the hier backend's
// chain across nodes) with op sum. Exactly what reduce(avg) does after its sum for the dtypes
// whose accumulation type is their own (float32, float64, int32, int64: ints truncate toward
// zero); ConfigError for float16/bfloat16, whose sum reduce() keeps in float and rounds once.
void divide(DType dtype, void* data, std::size_t count, int n);

// dst[i] = src[i] * factor (dst may be src), for the floating dtypes: float32/float64 multiply in
// their own type, float16/bfloat16 widen to float, multiply by (float)factor and round once. The
// pre-division of an all-reduce (AllReduceOptions::prescale, DDP's sum of pre-divided
// gradients) and DDP's scaled copies both use it, so their bits agree. ConfigError on integers.
void scale(DType dtype, void* dst, const void* src, std::size_t count, double factor);

}  // namespace fastrun::kernels

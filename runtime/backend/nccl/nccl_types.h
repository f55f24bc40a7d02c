#pragma once
// fastrun's element types and reduction ops in NCCL's terms. Internal header: includes nccl.h.
#include <nccl.h>

#include <string>

#include "fastrun/runtime/process_group/types.h"

namespace fastrun::nccl {

ncclDataType_t to_nccl(DType dtype);
// avg is ncclAvg (NCCL >= 2.10): no fastrun kernel is needed for half/bf16 averages. On
// integer types NCCL's average truncates like integer division.
ncclRedOp_t to_nccl(ReduceOp op);

// "float32 x 1024": a buffer as the ops' descriptions (errors, flight records) name it.
std::string describe_view(const BufferView& b);

}  // namespace fastrun::nccl

#include "fastrun/runtime/backend/nccl/nccl_types.h"

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::nccl {

ncclDataType_t to_nccl(DType dtype) {
  switch (dtype) {
    case DType::float32: return ncclFloat32;
    case DType::float64: return ncclFloat64;
    case DType::float16: return ncclFloat16;
    case DType::bfloat16: return ncclBfloat16;
    case DType::int32: return ncclInt32;
    case DType::int64: return ncclInt64;
  }
  throw BackendError(fmt::format("nccl: unknown dtype {}; accepted: float32, float64, float16, bfloat16, "
                                 "int32, int64", static_cast<int>(dtype)));
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::product: return ncclProd;
  }
  throw BackendError(fmt::format("nccl: unknown reduce op {}; accepted: sum, avg, min, max, product",
                                 static_cast<int>(op)));
}

std::string describe_view(const BufferView& b) { return fmt::format("{} x {}", dtype_name(b.dtype), b.count); }

}  // namespace fastrun::nccl

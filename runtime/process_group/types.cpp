#include "fastrun/runtime/process_group/types.h"

namespace fastrun {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
  }
  return "?";
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::product: return "product";
  }
  return "?";
}

}  // namespace fastrun

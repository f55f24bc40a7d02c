#include "fastrun/runtime/process_group/op_number.h"

namespace fastrun {
namespace {
thread_local std::uint64_t t_given = 0;  // the issuing thread's; ops are issued synchronously
}  // namespace

OpNumberScope::OpNumberScope(std::uint64_t seq) : outer_(t_given) { t_given = seq; }
OpNumberScope::~OpNumberScope() { t_given = outer_; }

std::uint64_t given_op_number() { return t_given; }

}  // namespace fastrun

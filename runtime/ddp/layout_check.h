#pragma once
// DDP's set-up check: every rank must register the same parameters (count, element count,
// dtype, device kind, in the same order), or bucket k would mean different bytes on different
// ranks. One int64 all-gather of (number, hash) decides; only when it shows a difference does
// a second all-gather fetch the full layouts so the error can name the first mismatching
// parameter and which ranks have which version. Every rank sees the same gathered data, so
// every rank throws the same ConfigError (nobody is left waiting).
#include <string>
#include <vector>

#include "fastrun/runtime/ddp/bucket_plan.h"
#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::ddp {

void verify_same_layout(Backend& group, const std::vector<ParamLayout>& params,
                        const std::vector<std::string>& names, Duration timeout);

// "1024 x float32 on cpu"
std::string describe_layout(const ParamLayout& p);

}  // namespace fastrun::ddp

#include "fastrun/runtime/backend/gloo/fingerprint_prelude.h"

#include <gloo/allgather.h>
#include <gloo/context.h>

#include "fastrun/runtime/backend/gloo/kept_until_exit.h"
#include "fastrun/runtime/process_group/sequence_check.h"

namespace fastrun {

GroupRuntime::Body fingerprint_prelude(std::shared_ptr<::gloo::Context> context, OpDesc op, std::string group,
                                       std::vector<int> global_ranks) {
  return [context = std::move(context), op = std::move(op), group = std::move(group),
          global_ranks = std::move(global_ranks)](const OpContext& o) {
    OpDesc numbered = op;
    numbered.seq = static_cast<std::int64_t>(o.seq);
    const auto all_gather = [&](const std::vector<std::int64_t>& mine, std::vector<std::int64_t>& all) {
      auto exchange = std::make_unique<::gloo::AllgatherOptions>(context);
      exchange->setInput<std::int64_t>(const_cast<std::int64_t*>(mine.data()), mine.size());
      exchange->setOutput<std::int64_t>(all.data(), all.size());
      exchange->setTag(static_cast<std::uint32_t>(o.seq) | kPreludeTagBit);
      exchange->setTimeout(o.timeout);
      gloo_backend::run_collective(std::move(exchange), &::gloo::allgather);
    };
    check_ops_agree(numbered, context->rank, static_cast<std::size_t>(context->size), all_gather, group, global_ranks,
                    "found before an op over 2 MiB moved any data; every rank stops at this op");
  };
}

}  // namespace fastrun

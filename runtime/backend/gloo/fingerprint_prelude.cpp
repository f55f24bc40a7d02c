#include "fastrun/runtime/backend/gloo/fingerprint_prelude.h"

#include <cstring>

#include <gloo/allgather.h>
#include <gloo/context.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/sequence_check.h"

namespace fastrun {

GroupRuntime::Body fingerprint_prelude(std::shared_ptr<::gloo::Context> context, OpDesc op, std::string group,
                                       std::vector<int> global_ranks) {
  return [context = std::move(context), op = std::move(op), group = std::move(group),
          global_ranks = std::move(global_ranks)](const OpContext& o) {
    OpDesc numbered = op;
    numbered.seq = static_cast<std::int64_t>(o.seq);
    Fingerprint mine = fingerprint(numbered);
    const auto n = static_cast<std::size_t>(context->size);
    std::vector<std::int64_t> words(n * Fingerprint::kWords);
    ::gloo::AllgatherOptions exchange(context);
    exchange.setInput<std::int64_t>(mine.words.data(), Fingerprint::kWords);
    exchange.setOutput<std::int64_t>(words.data(), words.size());
    exchange.setTag(static_cast<std::uint32_t>(o.seq) | kPreludeTagBit);
    exchange.setTimeout(o.timeout);
    ::gloo::allgather(exchange);
    std::vector<RankOp> ops(n);
    for (std::size_t r = 0; r < n; ++r) {
      ops[r].rank = r < global_ranks.size() ? global_ranks[r] : static_cast<int>(r);
      std::memcpy(ops[r].op.words.data(), words.data() + r * Fingerprint::kWords, sizeof(Fingerprint::words));
    }
    const std::string text = describe_mismatch(std::move(ops), numbered.seq, group,
                                               "found before an op over 2 MiB moved any data; every rank stops at "
                                               "this op");
    if (!text.empty()) throw ConfigError(text);
  };
}

}  // namespace fastrun

#pragma once
// The default mismatch check of gloo's large ops (docs/collectives.md, "When ranks disagree").
// An op over the staging limit (2 MiB) works on the caller's buffers, and Gloo cannot cancel it:
// when the ranks issued different ops there, a rank whose transport thread failed could only
// return at the op timeout. So before such an op touches the caller's buffers the ranks exchange
// its fingerprint (op_record.h) with one Gloo all-gather of 80 bytes per rank, on a tag of its
// own; when the fingerprints differ every rank fails the op at once with the sequence mode's
// message. It costs about one small gloo op per op over 2 MiB: measured on the 2-core VM, +16 %
// at 4 MiB and within the run-to-run spread from 16 MiB (docs/benchmarks.md, "gloo's prelude").
//
// Whether an op has the prelude must not depend on the rank for ops that agree: it is decided
// from the bytes the backend passes to the runtime, which are the same on every rank of a
// matching op (gather and scatter pass the root's whole buffer on every rank), and only for ops
// with a fingerprinted buffer. all_to_allv has none: its bytes differ by rank when the ranks
// agree, so no size can decide for every rank alike, and a prelude on every all_to_allv would
// cost one small gloo op each (measured with `fastrun-bench p2p --backend gloo --op alltoallv`:
// 0.24 ms became 0.96 ms at 8 bytes, 0.60 ms became 1.61 ms at 1 MiB). Ranks whose mismatching
// ops fall on both sides of the limit meet no prelude and stall: the stalled-op check finds them
// within seconds, and since the large op is still in its prelude (it holds none of the caller's
// buffers) its wait returns then too.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "fastrun/runtime/process_group/group_runtime.h"
#include "fastrun/runtime/process_group/op_record.h"

namespace gloo {
class Context;
}

namespace fastrun {

// Tags of the preludes' all-gathers: the op's own tag (its number) with the top bit set, so a
// prelude never meets an op's messages, also with FASTRUN_DEBUG=sequence's all-gather.
constexpr std::uint32_t kPreludeTagBit = 1u << 31;

// The prelude of `op` (its number comes from the OpContext), for GroupRuntime::run.
GroupRuntime::Body fingerprint_prelude(std::shared_ptr<::gloo::Context> context, OpDesc op, std::string group,
                                       std::vector<int> global_ranks);

}  // namespace fastrun

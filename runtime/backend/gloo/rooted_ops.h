#pragma once
// The bodies of the gloo backend's rooted and all-to-all collectives, one function each, run on
// the group's comm thread (gloo_backend.cpp submits them). Arguments are checked by the caller
// (process_group/shape_check.h); counts of zero are handled there too.
#include <cstdint>
#include <memory>
#include <vector>

#include <gloo/context.h>

#include "fastrun/runtime/process_group/types.h"
#include "fastrun/runtime/duration.h"

namespace fastrun::gloo_backend {

// The one-way collectives send each message with its length (sized_messages.h): a receiver
// sent fewer elements than it expects fails the op naming the pair, in the words of
// describe_wrong_lengths, `global_ranks` naming the ranks (empty: group ranks are global).
//
// Gathers every rank's buffer at the root and reduces them there with the shared kernel in rank
// order (reduce_kernels.h): the bits shm's reduce and all_reduce give. Other ranks' buffers
// are not written.
void run_reduce(const std::shared_ptr<::gloo::Context>& ctx, BufferView b, ReduceOp op, int root, std::uint32_t tag,
                Duration timeout, const std::vector<int>& global_ranks);
void run_gather(const std::shared_ptr<::gloo::Context>& ctx, BufferView input, BufferView output, int root,
                std::uint32_t tag, Duration timeout, const std::vector<int>& global_ranks);
void run_scatter(const std::shared_ptr<::gloo::Context>& ctx, BufferView input, BufferView output, int root,
                 std::uint32_t tag, Duration timeout, const std::vector<int>& global_ranks);
// `buffer` from the root to every rank, over a binomial tree (Gloo's broadcast.cc).
void run_broadcast(const std::shared_ptr<::gloo::Context>& ctx, BufferView buffer, int root, std::uint32_t tag,
                   Duration timeout, const std::vector<int>& global_ranks);
void run_all_to_all(const std::shared_ptr<::gloo::Context>& ctx, BufferView input, BufferView output,
                    std::uint32_t tag, Duration timeout);
// Each message carries its length (sized_messages.h), and a rank sent fewer elements than
// recv_counts says fails naming the pairs. With `lengths_first` (the op works on the caller's
// buffers) a rank posts each receive only once its length came, one message time later: a
// longer message then goes to a scratch buffer and fails the op the same way, where posted at
// once it would fail Gloo's transport thread and hold the op until its timeout
// (transport_failure.h); staged ops fail at once on that, so they post everything in one round.
void run_all_to_allv(const std::shared_ptr<::gloo::Context>& ctx, BufferView input,
                     const std::vector<std::size_t>& send_counts, BufferView output,
                     const std::vector<std::size_t>& recv_counts, std::uint32_t tag, Duration timeout,
                     bool lengths_first, const std::vector<int>& global_ranks);

}  // namespace fastrun::gloo_backend

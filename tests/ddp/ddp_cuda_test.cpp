// DDP on CUDA buffers over the nccl backend, world of one: the device paths (buckets in device
// memory, device-to-device copies, backend averaging) end to end. Compiled only with NCCL;
// skipped at run time when no GPU is visible (the development machines have none).
//
// In a world of one an in-place all-reduce is the identity (NCCL skips it, or for avg multiplies
// by one), so gradients that come back unchanged prove nothing: they would be the same if DDP
// never called the backend, or if the nccl group's call did nothing. The group DDP runs on here
// therefore performs each all-reduce as its two real halves on the nccl group, each written out
// of place over poison (0xFF bytes: NaN): a reduce-scatter of the bucket into a poisoned buffer,
// then, with the bucket itself poisoned, an all-gather of that buffer back into the bucket. A
// gradient equals its input only if both NCCL collectives wrote every byte of it (and DDP handed
// the right memory to the group and copied the right bucket slices back).
#ifdef FASTRUN_HAVE_NCCL
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "fastrun/runtime/backend/registry/registry.h"
#include "fastrun/runtime/cuda/device_buffer.h"
#include "fastrun/runtime/cuda/device_identity.h"
#include "fastrun/runtime/ddp/buffer_ops.h"
#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/store/memory_store.h"
#include "gpu/nccl_suite.h"
#include "test_support/skip.h"

using namespace fastrun;

namespace {

// The nccl group, with every all-reduce done as reduce-scatter + all-gather over poison (see the
// top of the file) and recorded, so the test can check which buffers DDP reduced with which op.
class SplitAllReduceGroup final : public Backend {
 public:
  explicit SplitAllReduceGroup(Backend& nccl) : nccl_(nccl) {}
  int rank() const override { return nccl_.rank(); }
  int size() const override { return nccl_.size(); }
  std::string backend_name() const override { return nccl_.backend_name(); }

  WorkHandle all_reduce(const Op& call, BufferView bucket, const AllReduceOptions& options) override {
    reduced.push_back({bucket, options.op});
    DeviceBuffer scattered = nccl_suite::poisoned(bucket.bytes());
    nccl_.reduce_scatter(call, bucket, scattered.view(bucket.count, bucket.dtype), {options.op})->wait();
    const DeviceBuffer poison = nccl_suite::poisoned(bucket.bytes());
    ddp::copy_scaled(bucket.data, poison.data(), bucket.count, bucket.dtype, DeviceKind::cuda, 1.0);
    nccl_.all_gather(call, scattered.view(bucket.count, bucket.dtype), bucket, {})->wait();
    return completed_work();  // both halves were waited for: the bucket holds the result
  }
  WorkHandle broadcast(const Op& call, BufferView b, const BroadcastOptions& o) override { return nccl_.broadcast(call, b, o); }
  WorkHandle all_gather(const Op& call, BufferView i, BufferView o, const AllGatherOptions& op) override {
    return nccl_.all_gather(call, i, o, op);
  }
  WorkHandle reduce_scatter(const Op& call, BufferView i, BufferView o, const ReduceScatterOptions& op) override {
    return nccl_.reduce_scatter(call, i, o, op);
  }
  WorkHandle barrier(const Op& call, const BarrierOptions& o) override { return nccl_.barrier(call, o); }
  WorkHandle send(const Op& call, BufferView b, int peer, const SendOptions& o) override { return nccl_.send(call, b, peer, o); }
  WorkHandle recv(const Op& call, BufferView b, int peer, const RecvOptions& o) override { return nccl_.recv(call, b, peer, o); }
  WorkHandle batch_send_recv(const Op& call, const std::vector<P2POp>& ops) override { return nccl_.batch_send_recv(call, ops); }
  WorkHandle reduce(const Op& call, BufferView b, const ReduceOptions& o) override { return nccl_.reduce(call, b, o); }
  WorkHandle gather(const Op& call, BufferView i, BufferView o, const GatherOptions& op) override { return nccl_.gather(call, i, o, op); }
  WorkHandle scatter(const Op& call, BufferView i, BufferView o, const ScatterOptions& op) override { return nccl_.scatter(call, i, o, op); }
  WorkHandle all_to_all(const Op& call, BufferView i, BufferView o, const AllToAllOptions& op) override {
    return nccl_.all_to_all(call, i, o, op);
  }
  WorkHandle all_to_allv(const Op& call, BufferView i, const std::vector<std::size_t>& sc, BufferView o,
                         const std::vector<std::size_t>& rc, const AllToAllOptions& op) override {
    return nccl_.all_to_allv(call, i, sc, o, rc, op);
  }

  struct Call {
    BufferView buffer;
    ReduceOp op;
  };
  std::vector<Call> reduced;

 private:
  Backend& nccl_;
};

}  // namespace

TEST_CASE("DDP on CUDA buffers over nccl (world of one)", "[ddp][cuda]") {
  if (cuda_device_count() == 0) {
    test::skip_case("no CUDA device visible");
    return;
  }
  // In place: each bucket holds one gradient, so it is reduced on the caller's memory. Copied:
  // through the flat device buckets (device-to-device copies in and out).
  const bool in_place = GENERATE(true, false);
  CAPTURE(in_place);
  GroupSpec spec;
  spec.store = std::make_shared<MemoryStore>();
  spec.global_ranks = {0};
  spec.name = "ddp-cuda";
  spec.failure_store = std::make_shared<MemoryStore>();
  auto nccl = backend::find("nccl")(spec);
  SplitAllReduceGroup pg(*nccl);

  // 1.2 MB + 4 KB. Buckets fill in reverse registration order, so "b" comes first; a first cap
  // of its size closes it alone, and "a" makes the second bucket. (With the default 1 MiB cap
  // both would share one bucket: 4 KB is under the cap, and "a" then tips it over.)
  const std::size_t n1 = 300000, n2 = 1000;
  DeviceBuffer v1(n1 * 4), g1(n1 * 4), v2(n2 * 4), g2(n2 * 4);
  DdpOptions options;
  options.first_bucket_bytes = n2 * 4;
  options.reduce_in_place = in_place;
  DistributedDataParallel ddp(pg,
                              {{"a", v1.view(n1, DType::float32), g1.view(n1, DType::float32)},
                               {"b", v2.view(n2, DType::float32), g2.view(n2, DType::float32)}},
                              options);
  REQUIRE(ddp.buckets().size() == 2);
  std::vector<float> h1(n1), h2(n2);
  for (std::size_t i = 0; i < n1; ++i) h1[i] = static_cast<float>(i % 97);
  for (std::size_t i = 0; i < n2; ++i) h2[i] = static_cast<float>(i % 13) - 6.f;
  const std::vector<std::uint8_t> poison(n1 * 4, 0xFF);
  for (int step = 0; step < 2; ++step) {
    pg.reduced.clear();
    g1.upload(h1.data(), n1 * 4);
    {
      auto guard = ddp.no_sync();  // a no-op step: nothing may be copied or launched
      ddp.synchronize();
    }
    REQUIRE(pg.reduced.empty());
    g2.upload(h2.data(), n2 * 4);
    ddp.mark_ready(1);
    ddp.mark_ready(0);
    if (!in_place) {
      // Both buckets were reduced synchronously (the group above waits), so the gradients are
      // no longer read: poison them, and only finish()'s copy out of the buckets restores them.
      g1.upload(poison.data(), n1 * 4);
      g2.upload(poison.data(), n2 * 4);
    }
    ddp.finish();
    // One averaging all-reduce per bucket, in bucket order, on the caller's gradient memory
    // (in place) or on a flat buffer of the bucket's size elsewhere (copied).
    REQUIRE(pg.reduced.size() == 2);
    for (std::size_t b = 0; b < 2; ++b) {
      const auto& call = pg.reduced[b];
      const auto& plan = ddp.buckets()[b];
      REQUIRE(plan.params.size() == 1);
      const auto& grad = ddp.parameter(plan.params[0]).grad;
      CHECK(call.op == ReduceOp::avg);
      CHECK(call.buffer.count == plan.count);
      CHECK(call.buffer.device == DeviceKind::cuda);
      CHECK((call.buffer.data == grad.data) == in_place);
      CHECK(ddp.last_step_stats()[b].in_place == in_place);
    }
    std::vector<float> r1(n1), r2(n2);
    g1.download(r1.data(), n1 * 4);
    g2.download(r2.data(), n2 * 4);
    REQUIRE(r1 == h1);  // written back by the reduce-scatter + all-gather, not left in place
    REQUIRE(r2 == h2);
  }
}
#endif

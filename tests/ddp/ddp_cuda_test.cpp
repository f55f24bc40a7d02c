// DDP on CUDA buffers over the nccl backend, world of one: the device paths (buckets in device
// memory, device-to-device copies, backend averaging) end to end. Compiled only with NCCL;
// skipped at run time when no GPU is visible (the development machines have none).
#ifdef FASTRUN_HAVE_NCCL
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "fastrun/runtime/backend/registry.h"
#include "fastrun/runtime/cuda/device_buffer.h"
#include "fastrun/runtime/cuda/device_identity.h"
#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/store/memory_store.h"
#include "test_support/skip.h"

using namespace fastrun;

TEST_CASE("DDP on CUDA buffers over nccl (world of one)", "[ddp][cuda]") {
  if (cuda_device_count() == 0) {
    test::skip_case("no CUDA device visible");
    return;
  }
  GroupSpec spec;
  spec.store = std::make_shared<MemoryStore>();
  spec.global_ranks = {0};
  spec.name = "ddp-cuda";
  spec.failure_store = std::make_shared<MemoryStore>();
  auto pg = backend::find("nccl")(spec);

  const std::size_t n1 = 300000, n2 = 1000;  // 1.2 MB + 4 KB: two buckets with the 1 MiB first cap
  DeviceBuffer v1(n1 * 4), g1(n1 * 4), v2(n2 * 4), g2(n2 * 4);
  DistributedDataParallel ddp(*pg, {{"a", v1.view(n1, DType::float32), g1.view(n1, DType::float32)},
                                    {"b", v2.view(n2, DType::float32), g2.view(n2, DType::float32)}});
  REQUIRE(ddp.buckets().size() == 2);
  std::vector<float> h1(n1), h2(n2);
  for (std::size_t i = 0; i < n1; ++i) h1[i] = static_cast<float>(i % 97);
  for (std::size_t i = 0; i < n2; ++i) h2[i] = static_cast<float>(i % 13) - 6.f;
  for (int step = 0; step < 2; ++step) {
    g1.upload(h1.data(), n1 * 4);
    {
      auto guard = ddp.no_sync();  // a no-op step: nothing may be copied or launched
      ddp.synchronize();
    }
    g2.upload(h2.data(), n2 * 4);
    ddp.mark_ready(1);
    ddp.mark_ready(0);
    ddp.finish();
    std::vector<float> r1(n1), r2(n2);
    g1.download(r1.data(), n1 * 4);
    g2.download(r2.data(), n2 * 4);
    REQUIRE(r1 == h1);  // the average over one rank is the value itself, through the buckets
    REQUIRE(r2 == h2);
  }
}
#endif

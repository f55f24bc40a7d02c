#pragma once
// Copies into the shared regions, choosing per rank between plain stores and non-temporal
// (streaming) stores by measuring both.
//
// Why: a core that overwrites lines a peer core has read must invalidate the peer's copies.
// When the two vCPUs share an L3 that is cheap (36 GB/s measured); when the hypervisor places
// them on different CCDs it is not (2-3 GB/s), while streaming stores run at 20-29 GB/s in both
// placements and cost the reader nothing in the slow one (but ~4x in the fast one). Placement
// changes while a job runs, so the choice is re-measured: every kProbeEvery-th large copy uses
// the other method, and each method keeps a moving average of its cost per byte. Only the
// writer's own time is measured, which picks the right method in both placements.
//
// Threading: one per Channel, used by the group's issuing thread.
#include <cstddef>
#include <cstdint>

namespace fastrun::shm {

class SharedCopy {
 public:
  static constexpr std::size_t kMeasureBytes = 16 * 1024;  // smaller copies just use memcpy
  static constexpr unsigned kProbeEvery = 128;  // a probe of the slow method can cost 10x: keep it rare

  void copy(void* dst, const void* src, std::size_t bytes);
  bool streaming() const { return prefer_streaming_; }

 private:
  double cost_[2] = {0, 0};  // ns per byte: [plain, streaming]; 0 = not measured yet
  unsigned calls_ = 0;
  bool prefer_streaming_ = false;
};

// Streaming-store copy (falls back to memcpy where unsupported). Ordered before a later
// publish by the fence it ends with.
void copy_streaming(void* dst, const void* src, std::size_t bytes);

}  // namespace fastrun::shm

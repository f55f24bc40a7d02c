#include "fastrun/runtime/backend/shm/shared_copy.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fastrun::shm {

void copy_streaming(void* dst, const void* src, std::size_t bytes) {
#if defined(__SSE2__)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Unaligned head with plain stores, then whole 64-byte lines streamed, then the tail.
  const std::size_t head = std::min(bytes, (64 - reinterpret_cast<std::uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const std::size_t body = bytes / 64 * 64;
  for (std::size_t i = 0; i < body; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + body, s + body, bytes - body);
  _mm_sfence();  // streaming stores are weakly ordered: make them visible before the publish
#else
  std::memcpy(dst, src, bytes);
#endif
}

void SharedCopy::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes < kMeasureBytes) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // Probe the method not in use now and then (and each once at the start).
  bool streaming = prefer_streaming_;
  if (++calls_ % kProbeEvery == 0 || cost_[!prefer_streaming_ ? 1 : 0] == 0) streaming = !prefer_streaming_;
  const auto t0 = std::chrono::steady_clock::now();
  if (streaming) {
    copy_streaming(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
  const double ns = static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  double& c = cost_[streaming ? 1 : 0];
  double sample = ns / static_cast<double>(bytes);
  if (c > 0) sample = std::min(sample, 4 * c);  // a preempted copy must not flip the choice alone
  c = c == 0 ? sample : 0.75 * c + 0.25 * sample;
  if (cost_[0] > 0 && cost_[1] > 0) prefer_streaming_ = cost_[1] < cost_[0];
}

}  // namespace fastrun::shm

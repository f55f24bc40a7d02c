#include "fastrun/runtime/process_group/copy_bytes.h"

#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace fastrun {

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
#if defined(__x86_64__)
  if (bytes >= kStringCopyBytes &&
      slow_copy_phase(reinterpret_cast<std::uintptr_t>(dst), reinterpret_cast<std::uintptr_t>(src))) {
    auto* d = static_cast<std::byte*>(dst);
    const auto* s = static_cast<const std::byte*>(src);
    std::size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {  // SSE2, part of x86-64 itself: no dispatch needed
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    if (i < bytes) std::memcpy(d + i, s + i, bytes - i);  // under 64 bytes: no string copy
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace fastrun

#pragma once
// Allocator for the materialised orders: blocks of 2 MiB and more are 2 MiB-aligned and, on
// Linux, advised as transparent huge pages. Fisher–Yates over 10^8 entries touches memory at
// random, and with 4 KiB pages nearly every swap also misses the TLB.
#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace fastrun::samplers {

template <class T>
struct TableAlloc {
  using value_type = T;
  static constexpr std::size_t kHuge = std::size_t{2} << 20;

  TableAlloc() = default;
  template <class U>
  TableAlloc(const TableAlloc<U>&) {}

  T* allocate(std::size_t count) {
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kHuge) return static_cast<T*>(::operator new(bytes));
    const std::size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (!p) throw std::bad_alloc();
#if defined(__linux__)
    ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure leaves normal pages
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t count) noexcept {
    if (count * sizeof(T) < kHuge) {
      ::operator delete(p);
    } else {
      std::free(p);
    }
  }
  template <class U>
  bool operator==(const TableAlloc<U>&) const {
    return true;
  }
};

}  // namespace fastrun::samplers

#pragma once
// An allocator for objects made and freed once per op (a point-to-point Work and its batch):
// a freed block goes to a short list of its thread, and the next allocation of that size on that
// thread takes it back, so a send/recv pays no malloc and no free (on the 8-byte ping-pong,
// 270-300 of 3,600-3,900 instructions a round trip, docs/benchmarks.md).
//
// Use with std::allocate_shared: the control block and the object are one block, and the
// allocator is rebound to their type, so the list is per size of that whole block.
// A block may be freed on another thread than the one that took it; it then joins that thread's
// list. Each list keeps at most kRecycledBlocks blocks (a burst of ops in flight leaves no more
// behind) and frees them when its thread ends. Under AddressSanitizer nothing is kept, so that a
// use after free is still caught.
#include <cstddef>
#include <new>

#if defined(__SANITIZE_ADDRESS__)  // GCC
#define FASTRUN_RECYCLE_BLOCKS 0
#elif defined(__has_feature)  // Clang
#if __has_feature(address_sanitizer)
#define FASTRUN_RECYCLE_BLOCKS 0
#endif
#endif
#ifndef FASTRUN_RECYCLE_BLOCKS
#define FASTRUN_RECYCLE_BLOCKS 1
#endif

namespace fastrun {

inline constexpr std::size_t kRecycledBlocks = 8;

namespace detail {

// The heap, with the alignment asked only where plain new does not give it (the aligned
// operator new is a slower path of malloc).
inline void* heap_new(std::size_t bytes, std::size_t align) {
  if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(bytes);
  return ::operator new(bytes, std::align_val_t{align});
}
inline void heap_delete(void* p, std::size_t align) noexcept {
  if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) ::operator delete(p);
  else ::operator delete(p, std::align_val_t{align});
}

// The free list of one block size and alignment on the calling thread.
template <std::size_t Size, std::size_t Align>
class RecycledBlocks {
 public:
  static void* take() noexcept {
    List& l = list_;
    Node* n = l.head;
    if (!n) return nullptr;
    l.head = n->next;
    --l.count;
    return n;
  }
  // Whether `p` was kept; if not, the caller frees it.
  static bool keep(void* p) noexcept {
#if !FASTRUN_RECYCLE_BLOCKS
    (void)p;
    return false;
#else
    List& l = list_;
    if (l.count >= kRecycledBlocks || l.closed) return false;
    if (!l.armed) {  // this thread's first keep: have its list freed when it ends
      l.armed = true;
      reaper_.arm();
    }
    l.head = new (p) Node{l.head};
    ++l.count;
    return true;
#endif
  }

 private:
  struct Node {
    Node* next;
  };
  // Trivial, so that the hot path reads it with no guard of a thread-local's construction.
  struct List {
    Node* head = nullptr;
    std::size_t count = 0;
    bool armed = false;
    bool closed = false;
  };
  // Frees this thread's list when the thread ends; after that, nothing more is kept (a block
  // freed by another thread-local object's destructor goes straight back to the heap).
  struct Reaper {
    void arm() noexcept {}  // touching the object constructs it, which registers its destructor
    ~Reaper() {
      list_.closed = true;
      while (void* p = take()) heap_delete(p, Align);
    }
  };
  static_assert(Size >= sizeof(Node) && Align >= alignof(Node));

  static inline thread_local constinit List list_{};
  static inline thread_local Reaper reaper_;
};

}  // namespace detail

template <class T>
struct RecyclingAllocator {
  using value_type = T;

  RecyclingAllocator() = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}  // NOLINT: rebinding converts implicitly

  T* allocate(std::size_t n) {
    if (n != 1) return static_cast<T*>(heap_new(n * sizeof(T)));
    if (void* p = Blocks::take()) return static_cast<T*>(p);
    return static_cast<T*>(heap_new(kSize));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1 && Blocks::keep(p)) return;
    heap_delete(p);
  }

  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }

 private:
  // At least a list node's size and alignment, so that every block of a list can hold one.
  static constexpr std::size_t kAlign = alignof(T) < alignof(void*) ? alignof(void*) : alignof(T);
  static constexpr std::size_t kSize = sizeof(T) < sizeof(void*) ? sizeof(void*) : sizeof(T);
  using Blocks = detail::RecycledBlocks<kSize, kAlign>;
  static void* heap_new(std::size_t bytes) { return detail::heap_new(bytes, kAlign); }
  static void heap_delete(void* p) noexcept { detail::heap_delete(p, kAlign); }
};

}  // namespace fastrun

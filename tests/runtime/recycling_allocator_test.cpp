// The allocator of per-op objects (process_group/recycling_allocator.h): a freed block comes back
// to the next allocation of its size on the freeing thread, at most kRecycledBlocks are kept,
// and a thread's blocks go back to the heap when it ends. Under AddressSanitizer nothing is kept
// (so that ASan still sees every free), which these tests expect there instead.
#include <catch2/catch.hpp>

#include <malloc.h>

#include <array>
#include <memory>
#include <thread>
#include <vector>

#include "fastrun/runtime/process_group/recycling_allocator.h"

using namespace fastrun;

namespace {

constexpr bool kKeeps = FASTRUN_RECYCLE_BLOCKS;

// A size no other allocation of these tests shares (the lists are per size and alignment).
struct Block {
  std::array<std::byte, 3000> bytes;
};
using Alloc = RecyclingAllocator<Block>;

}  // namespace

TEST_CASE("recycling allocator: a freed block is the next allocation of its size on that thread") {
  Alloc a;
  Block* first = a.allocate(1);
  a.deallocate(first, 1);
  Block* again = a.allocate(1);
  CHECK((again == first) == kKeeps);
  a.deallocate(again, 1);
  // Arrays are never kept: their sizes vary.
  Block* two = a.allocate(2);
  a.deallocate(two, 2);
  Block* one = a.allocate(1);
  CHECK((one == first) == kKeeps);
  a.deallocate(one, 1);
}

TEST_CASE("recycling allocator: at most kRecycledBlocks blocks are kept per thread") {
  Alloc a;
  // Drain whatever an earlier test left in this thread's list.
  std::vector<Block*> drained;
  for (std::size_t i = 0; i < kRecycledBlocks; ++i) drained.push_back(a.allocate(1));
  for (Block* b : drained) ::operator delete(b);  // straight to the heap: the list is empty now

  constexpr std::size_t kMany = 3 * kRecycledBlocks;
  std::vector<Block*> blocks;
  for (std::size_t i = 0; i < kMany; ++i) blocks.push_back(a.allocate(1));
  for (Block* b : blocks) a.deallocate(b, 1);
  // Kept: the first kRecycledBlocks freed. The blocks freed after them went to the heap,
  // where malloc may hand one back; the kept ones come first, most recently freed first.
  std::vector<Block*> again;
  for (std::size_t i = 0; i < kRecycledBlocks; ++i) again.push_back(a.allocate(1));
  if (kKeeps) {
    for (std::size_t i = 0; i < kRecycledBlocks; ++i) CHECK(again[i] == blocks[kRecycledBlocks - 1 - i]);
  }
  for (Block* b : again) a.deallocate(b, 1);
}

TEST_CASE("recycling allocator: a block freed on another thread joins that thread's list") {
  Alloc a;
  Block* made = a.allocate(1);
  Block* reused_there = nullptr;
  std::thread([&] {
    a.deallocate(made, 1);
    reused_there = a.allocate(1);
    a.deallocate(reused_there, 1);
  }).join();
  CHECK((reused_there == made) == kKeeps);
}

TEST_CASE("recycling allocator: a thread's kept blocks go back to the heap when it ends") {
  // 400 threads each keep kRecycledBlocks blocks of 3 KB: 9.6 MB if their lists were never freed.
  Alloc a;
  auto in_use = [] { return mallinfo2().uordblks; };
  const std::size_t before = in_use();
  for (int t = 0; t < 400; ++t) {
    std::thread([&] {
      std::vector<Block*> blocks;
      for (std::size_t i = 0; i < kRecycledBlocks; ++i) blocks.push_back(a.allocate(1));
      for (Block* b : blocks) a.deallocate(b, 1);
    }).join();
  }
  const std::size_t after = in_use();
  CHECK(after < before + (1u << 20));
}

TEST_CASE("recycling allocator: allocate_shared builds and destroys the object in a recycled block") {
  struct Counted {
    explicit Counted(int& live) : live_(live) { ++live_; }
    ~Counted() { --live_; }
    int& live_;
    std::array<std::byte, 700> payload{};
  };
  int live = 0;
  const void* first_block = nullptr;
  {
    auto p = std::allocate_shared<Counted>(RecyclingAllocator<Counted>{}, live);
    first_block = p.get();
    CHECK(live == 1);
  }
  CHECK(live == 0);
  auto q = std::allocate_shared<Counted>(RecyclingAllocator<Counted>{}, live);
  CHECK(live == 1);
  CHECK((q.get() == first_block) == kKeeps);  // the same control block and object, reused
}

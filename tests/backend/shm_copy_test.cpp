// The shm backend's bulk copy (process_group/copy_bytes.h): copy_bytes is memcpy at every size and phase
// (the vector loop for the slow phases included: its 64-byte body and its tail), and messages
// whose buffers sit at any phase to each other arrive whole on every path a message takes:
// eager through the ring, single copy out of the sender's memory (the kernel's copy through the
// bounce buffer when the phase is slow), and the cooperative copy, where the sender writes too.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "fastrun/runtime/process_group/copy_bytes.h"
#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"
#include "fastrun/runtime/join/context.h"
#include "test_support/rank_runner.h"

using namespace fastrun;

namespace {

std::uint8_t pattern(std::size_t i, int salt) { return static_cast<std::uint8_t>(i * 167 + i / 251 + salt * 31 + 1); }

// The first 64-byte boundary in `bytes` (which holds 63 bytes to spare), from which the phases count.
std::uint8_t* line_start(std::vector<std::uint8_t>& bytes) {
  return reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(bytes.data()) + 63) & ~std::uintptr_t{63});
}

}  // namespace

TEST_CASE("shm copy_bytes copies every size at every phase, and nothing around it", "[shm]") {
  const std::vector<std::size_t> sizes = {0, 1, 63, 64, 65, 2047, 2048, 2049, 4096 + 17, 70000};
  const std::vector<std::size_t> phases = {0, 1, 3, 8, 16, 24, 31, 32, 40, 56, 63};
  for (std::size_t n : sizes)
    for (std::size_t s_off : phases)
      for (std::size_t d_off : phases) {
        std::vector<std::uint8_t> src(n + 128), dst(n + 128, 0xEE);
        for (std::size_t i = 0; i < src.size(); ++i) src[i] = pattern(i, 1);
        const std::uint8_t* s = line_start(src);
        std::uint8_t* d = line_start(dst);
        copy_bytes(d + d_off, s + s_off, n);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) wrong += d[d_off + i] != s[s_off + i];
        for (std::uint8_t* p = dst.data(); p < d + d_off; ++p) wrong += *p != 0xEE;
        for (std::uint8_t* p = d + d_off + n; p < dst.data() + dst.size(); ++p) wrong += *p != 0xEE;
        INFO(fmt::format("{} bytes, source phase {}, destination phase {}", n, s_off, d_off));
        CHECK(wrong == 0);
      }
}

namespace {

// Rank 0 sends each size from a buffer at each phase to rank 1, which receives at each phase;
// then the other way round. Every byte is checked.
void check_phases(bool single_copy) {
  auto results = test::run_ranks(2, [single_copy](int) {
    shm::set_single_copy_allowed(single_copy);
    auto ctx = join({"shm"});
    Group& g = ctx->world();
    const int me = g.rank(), peer = 1 - me;
    const std::vector<std::size_t> phases = {0, 8, 16, 24, 40};
    // Eager, single copy (from 64 KiB), cooperative (from 1 MiB), and a tail past 64 KiB pieces.
    for (std::size_t n : {std::size_t{3000}, std::size_t{70000}, std::size_t{300002}, std::size_t{(2u << 20) + 66}})
      for (std::size_t from : phases)
        for (std::size_t to : phases)
          for (int sender = 0; sender < 2; ++sender) {
            std::vector<std::uint8_t> buf(n + 128);
            std::uint8_t* base = line_start(buf);
            const int salt = static_cast<int>(n + from * 7 + to * 3) + sender;
            if (me == sender) {
              for (std::size_t i = 0; i < n; ++i) base[from + i] = pattern(i, salt);
              g.send(BufferView{base + from, n / 2, DType::float16, DeviceKind::cpu}, peer, {5})->wait();
            } else {
              g.recv(BufferView{base + to, n / 2, DType::float16, DeviceKind::cpu}, peer, {5})->wait();
              for (std::size_t i = 0; i < n; ++i)
                if (base[to + i] != pattern(i, salt))
                  throw std::runtime_error(fmt::format("{} bytes from phase {} to phase {}: byte {} is wrong", n, from,
                                                       to, i));
            }
          }
  });
  REQUIRE(test::all_ok(results));
}

}  // namespace

TEST_CASE("shm p2p: buffers at any phase to each other, on every path a message takes", "[shm][p2p][mp]") {
  SECTION("single copy and cooperative copies where allowed") { check_phases(true); }
  SECTION("every message through the rings") { check_phases(false); }
}

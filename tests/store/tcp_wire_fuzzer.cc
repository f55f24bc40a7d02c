// libFuzzer target for the tcp:// store's decoders (optional, not built by CMake or CI; the
// randomized tcp_wire_fuzz_test.cpp covers the same code in every test run). Build and run:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I build/include \
//     tests/store/tcp_wire_fuzzer.cc runtime/store/tcp/wire.cpp -lfmt -o /tmp/tcp_wire_fuzzer
//   /tmp/tcp_wire_fuzzer -max_total_time=60 -rss_limit_mb=512
// (build/include holds the "fastrun" -> source-root link every build dir makes.)
#include <cstddef>
#include <cstdint>

#include "fastrun/runtime/store/tcp/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace w = fastrun::tcp_wire;
  w::Limits limits;
  limits.max_value = 1 << 16;  // small caps so the fuzzer reaches the limit checks
  limits.max_key = 256;
  (void)w::decode_request(data, size, limits);
  (void)w::decode_reply(data, size, limits);
  // The same bytes as a stream, before and after authentication.
  for (std::size_t max_frame : {limits.max_hello_frame(), limits.max_frame()}) {
    w::FrameReader reader(max_frame);
    const std::size_t half = size / 2;
    auto sink = [&](const std::uint8_t* body, std::size_t n) {
      (void)w::decode_request(body, n, limits);
      return true;
    };
    if (!reader.feed(data, half, sink)) (void)reader.feed(data + half, size - half, sink);
  }
  return 0;
}

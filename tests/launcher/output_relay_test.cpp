// The relay's line assembly, fed directly: chunks cut anywhere still give whole lines, tags go
// on every line, the stderr tail keeps the last lines, an endless line is cut at kMaxLine.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include <catch2/catch.hpp>

#include "fastrun/launcher/output_relay.h"
#include "process_runner.h"

using fastrun::launcher::OutputRelay;
using fastrun::launcher::RelayOptions;
using fastrun::launcher::Stream;
using fastrun::test::read_file;
using fastrun::test::TempDir;

namespace {
int open_out(const std::string& path) { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); }
}  // namespace

TEST_CASE("relay: chunks split anywhere come out as whole tagged lines", "[launcher][relay]") {
  TempDir dir;
  const int out = open_out(dir.str() + "/out");
  const int err = open_out(dir.str() + "/err");
  {
    RelayOptions o;
    o.tag_output = true;
    o.terminal_out = out;
    o.terminal_err = err;
    OutputRelay relay(o);
    relay.add_rank(0);
    relay.add_rank(1);
    const std::string a = "alpha one\nalpha two\nalpha three (no newline)";
    const std::string b = "beta one\nbeta two\n";
    // Interleave 1-3 byte chunks of both ranks: no line may be spliced.
    std::size_t i = 0, j = 0, step = 1;
    while (i < a.size() || j < b.size()) {
      const std::size_t na = std::min(step, a.size() - i), nb = std::min(step, b.size() - j);
      relay.feed(0, Stream::out, a.data() + i, na);
      relay.feed(1, Stream::out, b.data() + j, nb);
      i += na;
      j += nb;
      step = step % 3 + 1;
    }
    relay.close_stream(0, Stream::out);
    relay.close_stream(1, Stream::out);
    for (int k = 0; k < 15; ++k) {
      const std::string line = "err line " + std::to_string(k) + "\n";
      relay.feed(1, Stream::err, line.data(), line.size());
    }
    const auto tail = relay.stderr_tail(1);
    REQUIRE(tail.size() == OutputRelay::kTailLines);
    CHECK(tail.front() == "err line 5");
    CHECK(tail.back() == "err line 14");
  }
  ::close(out);
  ::close(err);
  const std::string text = read_file(dir.path() / "out");
  for (const char* line : {"[rank 0] alpha one\n", "[rank 0] alpha two\n", "[rank 0] alpha three (no newline)\n",
                           "[rank 1] beta one\n", "[rank 1] beta two\n"}) {
    CHECK(text.find(line) != std::string::npos);
  }
  CHECK(std::count(text.begin(), text.end(), '\n') == 5);
  CHECK(read_file(dir.path() / "err").find("[rank 1] err line 14\n") != std::string::npos);
}

TEST_CASE("relay: --output modes and an endless line", "[launcher][relay]") {
  TempDir dir;
  const int out = open_out(dir.str() + "/out");
  const int err = open_out(dir.str() + "/err");
  {
    RelayOptions o;
    o.output = fastrun::launcher::OutputMode::only_error;
    o.terminal_out = out;
    o.terminal_err = err;
    OutputRelay relay(o);
    relay.add_rank(0);
    relay.add_rank(1);
    relay.feed(1, Stream::out, "hidden\n", 7);
    relay.feed(1, Stream::err, "shown\n", 6);
    relay.feed(0, Stream::out, "rank zero\n", 10);
    const std::string big(OutputRelay::kMaxLine + 10, 'z');
    relay.feed(0, Stream::out, big.data(), big.size());
    relay.close_stream(0, Stream::out);
  }
  ::close(out);
  ::close(err);
  const std::string text = read_file(dir.path() / "out");
  CHECK(text.find("hidden") == std::string::npos);
  CHECK(text.compare(0, 10, "rank zero\n") == 0);
  CHECK(text.size() == 10 + OutputRelay::kMaxLine + 10 + 1);  // cut once, newline at the end
  CHECK(read_file(dir.path() / "err") == "shown\n");
}

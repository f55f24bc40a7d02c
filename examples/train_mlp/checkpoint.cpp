#include "checkpoint.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "fastrun/runtime/os/atomic_file.h"
#include "fastrun/runtime/text/number.h"

namespace train_mlp {
namespace {

constexpr const char* kMagic = "fastrun-train-mlp-checkpoint 1";

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {} (errno {})", what, std::strerror(errno), errno));
}

}  // namespace

void write_checkpoint_atomic(const std::string& path, const Checkpoint& c) {
  std::string header = fmt::format("{}\nepoch {}\nglobal_step {}\nseed {}\nlayout {} {} {}\nsampler {}\nfloats {}\n", kMagic,
                                   c.epoch, c.global_step, c.seed, c.dim, c.hidden, c.classes, c.sampler_state,
                                   c.values.size());
  fastrun::os::AtomicFile f(path);  // temporary in the same directory, fsync, rename, fsync of the directory
  f.write(header.data(), header.size());
  f.write(c.values.data(), c.values.size() * sizeof(float));
  f.write("\nend\n", 5);
  f.commit();
}

Checkpoint read_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("opening checkpoint " + path);
  auto bad = [&](const std::string& why) {
    return std::runtime_error(fmt::format("checkpoint {}: {} (expected a file written by train_mlp)", path, why));
  };
  std::string line;
  if (!std::getline(in, line) || line != kMagic) throw bad("bad first line '" + line + "'");
  Checkpoint c;
  auto field = [&](const char* key) {
    if (!std::getline(in, line) || line.rfind(std::string(key) + " ", 0) != 0)
      throw bad(fmt::format("missing '{}' line", key));
    return line.substr(std::strlen(key) + 1);
  };
  // The whole field a number, so that a damaged line ("12abc") is an error, not 12.
  auto number = [&](const char* key) {
    const std::string text = field(key);
    const auto n = fastrun::text::to_integer(text, 0);
    if (!n) throw bad(fmt::format("'{}' is '{}', expected a whole number >= 0", key, text));
    return static_cast<std::uint64_t>(*n);
  };
  c.epoch = number("epoch");
  c.global_step = number("global_step");
  c.seed = number("seed");
  std::istringstream layout(field("layout"));
  layout >> c.dim >> c.hidden >> c.classes;
  c.sampler_state = field("sampler");
  c.values.resize(number("floats"));
  in.read(reinterpret_cast<char*>(c.values.data()), static_cast<std::streamsize>(c.values.size() * sizeof(float)));
  std::string tail(5, '\0');
  in.read(tail.data(), 5);
  if (!in || tail != "\nend\n") throw bad("truncated");
  return c;
}

}  // namespace train_mlp

#include "checkpoint.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "fastrun/runtime/os/atomic_file.h"

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
  try {
    c.epoch = std::stoull(field("epoch"));
    c.global_step = std::stoull(field("global_step"));
    c.seed = std::stoull(field("seed"));
    std::istringstream layout(field("layout"));
    layout >> c.dim >> c.hidden >> c.classes;
    c.sampler_state = field("sampler");
    c.values.resize(std::stoull(field("floats")));
  } catch (const std::logic_error& e) {  // stoull
    throw bad(std::string("malformed number: ") + e.what());
  }
  in.read(reinterpret_cast<char*>(c.values.data()), static_cast<std::streamsize>(c.values.size() * sizeof(float)));
  std::string tail(5, '\0');
  in.read(tail.data(), 5);
  if (!in || tail != "\nend\n") throw bad("truncated");
  return c;
}

}  // namespace train_mlp

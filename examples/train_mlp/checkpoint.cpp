#include "checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace train_mlp {
namespace {

constexpr const char* kMagic = "fastrun-train-mlp-checkpoint 1";

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {} (errno {})", what, std::strerror(errno), errno));
}

// Owns a file descriptor.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const char* p, std::size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail("writing " + path);
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void write_checkpoint_atomic(const std::string& path, const Checkpoint& c) {
  std::string header = fmt::format("{}\nepoch {}\nglobal_step {}\nseed {}\nlayout {} {} {}\nsampler {}\nfloats {}\n", kMagic,
                                   c.epoch, c.global_step, c.seed, c.dim, c.hidden, c.classes, c.sampler_state,
                                   c.values.size());
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    Fd f;
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f.fd < 0) fail("creating " + tmp);
    write_all(f.fd, header.data(), header.size(), tmp);
    write_all(f.fd, reinterpret_cast<const char*>(c.values.data()), c.values.size() * sizeof(float), tmp);
    write_all(f.fd, "\nend\n", 5, tmp);
    if (::fsync(f.fd) != 0) fail("fsync of " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    errno = e;
    fail("renaming " + tmp + " to " + path);
  }
  Fd dir;
  dir.fd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir.fd >= 0) ::fsync(dir.fd);  // best effort: the rename is already visible
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

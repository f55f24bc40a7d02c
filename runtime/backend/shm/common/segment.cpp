#include "fastrun/runtime/backend/shm/common/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::shm {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& name, int err) {
  throw BackendError(fmt::format("shm backend: {} '/dev/shm{}': {} (errno {})", what, name, std::strerror(err), err));
}

// No MAP_POPULATE: every rank would fill the page tables of the whole segment (16 MiB for 32
// oversubscribed ranks, 64 MiB for 32 with a core each) and clear them again at exit, which
// measured 20% of a 32-rank job's CPU from start to the first barrier (fastrun-bench launch).
// A rank touches the control blocks at set-up and the regions only as its collectives reach
// them; the pages themselves are allocated by the creator's posix_fallocate, so a lazy fault
// cannot SIGBUS on a full /dev/shm.
std::byte* map(int fd, std::size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) fail(fmt::format("cannot map {} bytes of", bytes), name, errno);
  return static_cast<std::byte*>(p);
}

}  // namespace

Segment Segment::create(const std::string& name, std::size_t bytes, std::size_t reserved) {
  Segment s;
  os::UniqueFd owner(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  const int fd = owner.get();
  if (fd < 0) fail("cannot create", name, errno);
  s.name_ = name;
  s.owns_name_ = true;  // from here on the destructor removes it if anything below throws
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    fail(fmt::format("cannot size to {} bytes (is /dev/shm full?)", bytes), name, err);
  }
  s.fd_ = std::move(owner);
  s.data_ = map(fd, bytes, name);
  s.size_ = bytes;
  // Reserve the pages the caller asked for now: on a full tmpfs (a container's 64 MiB /dev/shm)
  // a sparse segment would map fine and then SIGBUS on first touch instead of failing here.
  s.reserve(0, std::min(reserved, bytes));
  return s;
}

Segment Segment::open(const std::string& name, std::size_t min_bytes) {
  Segment s;
  os::UniqueFd owner(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  const int fd = owner.get();
  if (fd < 0) fail("cannot open (are all ranks of the group on one node?)", name, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("cannot stat", name, errno);
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (bytes < min_bytes)
    throw BackendError(fmt::format("shm backend: segment '/dev/shm{}' is {} bytes, expected at least {}", name,
                                   bytes, min_bytes));
  s.name_ = name;
  s.fd_ = std::move(owner);
  s.data_ = map(fd, bytes, name);
  s.size_ = bytes;
  return s;
}

void Segment::reserve(std::size_t offset, std::size_t bytes) const {
  if (bytes == 0) return;
  const int err = ::posix_fallocate(fd_.get(), static_cast<off_t>(offset), static_cast<off_t>(bytes));
  if (err != 0 && err != EOPNOTSUPP)
    fail(fmt::format("cannot reserve {} bytes at offset {} (is /dev/shm full? df /dev/shm)", bytes, offset), name_,
         err);
}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)),
      fd_(std::move(other.fd_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owns_name_(std::exchange(other.owns_name_, false)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owns_name_ = std::exchange(other.owns_name_, false);
  }
  return *this;
}

Segment::~Segment() { reset(); }

void Segment::unlink() noexcept {
  if (!name_.empty()) ::shm_unlink(name_.c_str());  // ENOENT: already removed by a peer
  owns_name_ = false;
}

void Segment::reset() noexcept {
  if (owns_name_) unlink();
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
  fd_.reset();
}

}  // namespace fastrun::shm

#pragma once
// A POSIX shared-memory segment mapped into this process (the owner of one mapping and, for the
// creator, of the name until it is unlinked).
//
// Life cycle used by the shm backend: rank 0 create()s "/fastrun-..." (0600, O_EXCL), the others
// open() it by name, and as soon as every rank has mapped it someone unlink()s the name; from
// then on the memory lives exactly as long as the mappings, so even SIGKILL of every rank leaves
// nothing in /dev/shm. A creator that is destroyed before the name was unlinked unlinks it.
// Move-only; the destructor never throws.
#include <cstddef>
#include <string>

#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::shm {

class Segment {
 public:
  Segment() = default;
  // Creates and maps a new segment of `bytes` and reserves (allocates) its first `reserved`
  // bytes, all of it by default; each rank reserves the rest as it comes to write there
  // (reserve()). `name` must start with '/'. BackendError naming the segment and errno on
  // failure (EEXIST included).
  static Segment create(const std::string& name, std::size_t bytes, std::size_t reserved = kAll);
  // Opens and maps an existing segment of whatever size its creator gave it (at least
  // `min_bytes`).
  static Segment open(const std::string& name, std::size_t min_bytes);

  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  // Removes the name (idempotent; ENOENT is fine: another rank got there first).
  void unlink() noexcept;

  // Allocates the pages of [offset, offset + bytes) in /dev/shm unless they are already (any
  // rank may; what is reserved stays). Writing a page of a tmpfs segment that was never
  // allocated raises SIGBUS when /dev/shm is full; this fails with a BackendError instead.
  // Reserving what a job never writes costs a page clear at creation and a free at exit for
  // every page: 5 MiB for 2 ranks, 51 MiB for 32, on the path of every join().
  void reserve(std::size_t offset, std::size_t bytes) const;

  static constexpr std::size_t kAll = static_cast<std::size_t>(-1);

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void reset() noexcept;

  std::string name_;
  os::UniqueFd fd_;  // kept for reserve(); the name may be gone by then
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool owns_name_ = false;  // the creator unlinks on destruction unless unlink() ran
};

}  // namespace fastrun::shm

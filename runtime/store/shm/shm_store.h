#pragma once
// shm://NAME — the rendezvous store in one POSIX shared-memory segment, /dev/shm/fastrun-NAME
// (Boost.Interprocess maps it). Layout and crash-safety argument: segment_layout.h.
//
// Threading: a ShmStore handle may be used from several threads at once (all state lives in
// the segment, under its robust mutex); clone() shares the mapping. Every blocking call
// (get, wait) sleeps on a futex and honours its timeout to the millisecond; taking the mutex is
// bounded by the store's timeout too (a holder stopped with SIGSTOP cannot wedge us forever).
// A timeout <= 0 checks once and fails at once.
#include <memory>
#include <string>

#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/store.h"

namespace boost::interprocess {
class mapped_region;
}

namespace fastrun::shm_store {

struct SegmentHeader;

// The mapping of one segment, shared by a store handle and its clones.
struct Mapping {
  std::string address;   // "shm://NAME"
  std::string segment;   // "/dev/shm/fastrun-NAME"
  std::unique_ptr<boost::interprocess::mapped_region> region;
  SegmentHeader* header = nullptr;
  // The segment's fd (owned, O_CLOEXEC, closed by the destructor): sets posix_fallocate heap
  // ranges through it as the store grows (lazy reservation, segment_layout.h).
  os::UniqueFd fd;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();
};

class ShmStore final : public Store {
 public:
  explicit ShmStore(std::shared_ptr<Mapping> mapping) : m_(std::move(mapping)) {}

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;
  std::unique_ptr<Store> clone() override;
  std::string describe() const override { return m_->address; }
  using Store::get;
  using Store::wait;

 private:
  std::shared_ptr<Mapping> m_;
};

// Reserves (posix_fallocate on `fd`) what a fresh segment of `total_bytes` touches at once: the
// header, slot table 0 and the first kFirstReserve bytes of heap 0. Creator only, before
// mapping; throws StoreError naming the size, `segment` and FASTRUN_SHM_STORE_BYTES.
// `min_keys`: how many keys the creator expects (StoreOptions::shm_min_keys); the slot tables
// grow to hold them (up to kMaxSlots, and a quarter of the segment). Same value for both calls.
void reserve_initial(int fd, std::uint64_t total_bytes, std::uint64_t min_keys, const std::string& address,
                     const std::string& segment);
// Lays out a fresh segment of `total_bytes` at `base` (creator only, after reserve_initial,
// before publishing magic).
void initialize_segment(void* base, std::uint64_t total_bytes, std::uint64_t min_keys, const std::string& address);
// The smallest segment this layout accepts.
inline constexpr std::uint64_t kMinSegmentBytes = 65536;
// The most key slots a segment has (3/4 of them usable): 16 MiB of tables.
inline constexpr std::uint64_t kMaxSlots = std::uint64_t{1} << 20;

}  // namespace fastrun::shm_store

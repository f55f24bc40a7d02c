// The operations of the shm:// store on a mapped segment (layout: segment_layout.h).
#include "fastrun/runtime/store/shm/shm_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <boost/interprocess/mapped_region.hpp>
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif
#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/hash/fnv1a.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/futex.h"
#include "fastrun/runtime/os/page.h"
#include "fastrun/runtime/store/memory_store.h"
#include "fastrun/runtime/store/owner.h"
#include "fastrun/runtime/store/shm/segment_layout.h"

namespace fastrun::shm_store {

Mapping::~Mapping() = default;  // here, where mapped_region is complete

namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t hash_key(const std::string& key) {
  return hash::fnv1a(key, hash::kFormatBasis) | 2;  // never 0 / 1
}

int bucket_of(std::uint64_t hash) { return static_cast<int>((hash >> 32) % kWaitBuckets); }

std::string mb(std::uint64_t bytes) {
  return bytes < (1u << 20) ? fmt::format("{:.1f} KiB", bytes / 1024.0) : fmt::format("{:.1f} MiB", bytes / 1048576.0);
}

// posix_fallocate, retried on EINTR (tmpfs stops a long allocation for a signal). 0 or an errno.
int fallocate_range(int fd, std::uint64_t offset, std::uint64_t len) {
  int rc;
  do rc = ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(len));
  while (rc == EINTR);
  return rc;
}

// Where the parts of a segment of `total_bytes` go.
struct Layout {
  std::uint64_t nslots;        // each table's room
  std::uint64_t first_slots;   // what table 0 starts with
  std::uint64_t header_bytes;  // tables start here
  std::uint64_t heaps_at;      // heap 0 starts here, heap 1 at heaps_at + heap_bytes
  std::uint64_t heap_bytes;
};

Layout plan(std::uint64_t total_bytes, std::uint64_t min_keys, const std::string& address) {
  Layout l{};
  // Slots: one per 4 KiB of segment, power of two, 1 Ki .. 1 Mi.
  l.nslots = 1024;
  while (l.nslots < kMaxSlots && l.nslots * 2 * 4096 <= total_bytes) l.nslots *= 2;
  // More where the creator expects more keys (3/4 of a table is usable), as long as both tables
  // take at most a quarter of the segment.
  while (l.nslots < kMaxSlots && l.nslots * 3 / 4 < min_keys && l.nslots * 2 * 2 * 8 * 4 <= total_bytes) l.nslots *= 2;
  // Table 0 starts with what the expected keys need, at least kFirstSlots; compactions double it.
  l.first_slots = std::min(l.nslots, kFirstSlots);
  while (l.first_slots < l.nslots && l.first_slots * 3 / 4 < min_keys) l.first_slots *= 2;
  l.header_bytes = (sizeof(SegmentHeader) + 63) & ~std::uint64_t{63};
  l.heaps_at = l.header_bytes + 2 * l.nslots * 8;
  if (total_bytes < l.heaps_at + 2 * 4096)
    throw ConfigError(fmt::format("{}: a segment of {} bytes is too small (FASTRUN_SHM_STORE_BYTES >= {})", address,
                                  total_bytes, kMinSegmentBytes));
  l.heap_bytes = ((total_bytes - l.heaps_at) / 2) & ~std::uint64_t{7};
  return l;
}

// All access to one segment's state, valid while the robust mutex is held.
class Locked {
 public:
  Locked(Mapping& m, Duration timeout) : m_(m), h_(*m.header), base_(reinterpret_cast<char*>(m.header)) {
    timespec deadline{};
    ::clock_gettime(CLOCK_REALTIME, &deadline);
    const auto ms = std::max<std::int64_t>(timeout.count(), 1000);  // the lock is held for microseconds
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1000000000;
    }
    int rc = ::pthread_mutex_timedlock(&h_.mutex, &deadline);
    if (rc == EOWNERDEAD) {
      tell_tsan_the_lock_is_held();
      repair();
      ::pthread_mutex_consistent(&h_.mutex);
    } else if (rc == ETIMEDOUT) {
      throw StoreError(fmt::format("{}: could not take the lock of {} within {} ms: a process holding it is stopped "
                                   "(SIGSTOP/debugger?)",
                                   m.address, m.segment, ms));
    } else if (rc != 0) {
      throw StoreError(fmt::format("{}: locking {} failed: {} — the segment is unusable; host a new store",
                                   m.address, m.segment, std::strerror(rc)));
    }
  }
  ~Locked() { ::pthread_mutex_unlock(&h_.mutex); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

  SegmentHeader& h() { return h_; }
  // The slots the active half's table uses.
  std::uint64_t slots() const { return h_.half[h_.active].slots; }

  // The slot holding `key`, or nullptr; `insert_at` gets where it would go (first tombstone or
  // empty slot on its probe path; nullptr when the table has neither).
  std::uint64_t* find(const std::string& key, std::uint64_t hash, std::uint64_t** insert_at = nullptr) {
    std::uint64_t* table = this->table(h_.active);
    const std::uint64_t n = slots(), mask = n - 1;
    std::uint64_t* tomb = nullptr;
    for (std::uint64_t i = 0, pos = hash & mask; i < n; ++i, pos = (pos + 1) & mask) {
      const std::uint64_t v = table[pos];
      if (v == kEmpty) {
        if (insert_at) *insert_at = tomb ? tomb : &table[pos];
        return nullptr;
      }
      if (v == kTombstone) {
        if (!tomb) tomb = &table[pos];
        continue;
      }
      const Record* r = record(v);
      if (r->hash == hash && r->key_len == key.size() && std::memcmp(r->key(), key.data(), key.size()) == 0)
        return &table[pos];
    }
    if (insert_at) *insert_at = tomb;
    return nullptr;
  }

  const Record* record(std::uint64_t offset) const { return reinterpret_cast<const Record*>(base_ + offset); }

  // Stores key=value (insert or replace). Compacts or fails with a StoreError when full.
  void put(const std::string& key, std::uint64_t hash, const std::uint8_t* value, std::uint64_t value_len) {
    const std::uint64_t need = record_bytes(key.size(), value_len);
    std::uint64_t* insert_at = nullptr;
    std::uint64_t* slot = find(key, hash, &insert_at);
    const bool table_crowded = !slot && (h_.live + h_.tombstones + 1) * 4 > slots() * 3 &&
                               !(insert_at && *insert_at == kTombstone);
    if (h_.half[h_.active].bump + need > h_.heap_bytes || table_crowded || (!slot && !insert_at)) {
      compact(key, value_len);
      insert_at = nullptr;
      slot = find(key, hash, &insert_at);
      const std::uint64_t live_bytes = h_.half[h_.active].bump;
      if (live_bytes + need > h_.heap_bytes)
        throw StoreError(fmt::format("{}: set('{}') of {} bytes: segment {} is full ({} bytes = 2 halves of {}, "
                                     "{} in use by {} keys); raise FASTRUN_SHM_STORE_BYTES",
                                     m_.address, key, value_len, m_.segment, h_.total_bytes, mb(h_.heap_bytes),
                                     mb(live_bytes), h_.live));
      if (!slot && (!insert_at || (h_.live + 1) * 4 > slots() * 3))
        throw StoreError(fmt::format("{}: set('{}'): segment {} has no free key slot ({} keys of {} slots); "
                                     "raise FASTRUN_SHM_STORE_BYTES (slots grow with it, up to {})",
                                     m_.address, key, m_.segment, h_.live, slots(), kMaxSlots));
    }
    // 0. make sure the bytes are backed (may throw; nothing changed yet), 1. claim them (one
    // store), 2. fill them, 3. publish with one release store.
    reserve(h_.active, h_.half[h_.active].bump + need, key, value_len);
    Half& half = h_.half[h_.active];
    const std::uint64_t offset = h_.heap_offset[h_.active] + half.bump;
    half.bump += need;
    auto* r = reinterpret_cast<Record*>(base_ + offset);
    r->hash = hash;
    r->key_len = key.size();
    r->value_len = value_len;
    std::memcpy(const_cast<char*>(r->key()), key.data(), key.size());
    if (value_len) std::memcpy(const_cast<std::uint8_t*>(r->value()), value, value_len);
    std::uint64_t* target = slot ? slot : insert_at;
    const bool was_tomb = !slot && *target == kTombstone;
    std::atomic_ref<std::uint64_t>(*target).store(offset, std::memory_order_release);
    if (!slot) {
      ++h_.live;
      if (was_tomb) --h_.tombstones;
    }
    bump_generation(hash);
  }

  bool erase(const std::string& key, std::uint64_t hash) {
    std::uint64_t* slot = find(key, hash);
    if (!slot) return false;
    std::atomic_ref<std::uint64_t>(*slot).store(kTombstone, std::memory_order_release);
    --h_.live;
    ++h_.tombstones;
    return true;
  }

  void bump_generation(std::uint64_t hash) {
    const int b = bucket_of(hash);
    h_.generation[b].fetch_add(1, std::memory_order_release);
    if (h_.waiters[b].load(std::memory_order_acquire) > 0) wake_bucket_ = b;
  }
  int wake_bucket() const { return wake_bucket_; }

 private:
  std::uint64_t* table(std::uint64_t which) { return reinterpret_cast<std::uint64_t*>(base_ + h_.table_offset[which]); }

  // Makes heap `which` backed by /dev/shm pages up to `upto` bytes (<= heap_bytes), growing the
  // watermark by at least what it has (kFirstReserve .. kReserveStep), in whole pages. On failure
  // throws, leaving the segment as it was; the watermark is stored only after posix_fallocate
  // succeeded (segment_layout.h). `key` and `value_len` name the set that needed the bytes.
  void reserve(std::uint64_t which, std::uint64_t upto, const std::string& key, std::uint64_t value_len) {
    Half& half = h_.half[which];
    if (upto <= half.reserved) return;
    const std::uint64_t step = std::clamp(half.reserved, kFirstReserve, kReserveStep);
    std::uint64_t target = std::max(upto, half.reserved + step);
    target = std::min<std::uint64_t>(os::round_up_to_page(target), h_.heap_bytes);  // tmpfs allocates pages
    if (const int rc = fallocate_range(m_.fd.get(), h_.heap_offset[which] + half.reserved, target - half.reserved))
      throw StoreError(fmt::format("{}: set('{}') of {} bytes: cannot reserve {} more of {} (a segment of {} bytes, "
                                   "{} reserved so far): {} (is /dev/shm smaller? lower FASTRUN_SHM_STORE_BYTES or "
                                   "enlarge /dev/shm)",
                                   m_.address, key, value_len, mb(target - half.reserved), m_.segment,
                                   h_.total_bytes, mb(half.reserved), std::strerror(rc)));
    half.reserved = target;
  }

  // Makes the first `slots` of table `which` backed before a compaction clears them (creation
  // reserves what table 0 starts with).
  void reserve_table(std::uint64_t which, std::uint64_t slots, const std::string& key, std::uint64_t value_len) {
    Half& half = h_.half[which];
    const std::uint64_t bytes = slots * 8;
    if (bytes <= half.table_reserved) return;
    if (const int rc = fallocate_range(m_.fd.get(), h_.table_offset[which] + half.table_reserved,
                                       bytes - half.table_reserved))
      throw StoreError(fmt::format("{}: set('{}') of {} bytes: cannot reserve a slot table of {} slots ({}) in {} to "
                                   "compact into: {} (is /dev/shm smaller? lower FASTRUN_SHM_STORE_BYTES or enlarge "
                                   "/dev/shm)",
                                   m_.address, key, value_len, slots, mb(bytes), m_.segment, std::strerror(rc)));
    half.table_reserved = bytes;
  }

  // Copies the live records into the other half, then flips `active` with one store. The other
  // half's table has twice the slots when the live keys and the one being set would fill more
  // than half of this one's (up to nslots). Reserves the other heap and table first, so a failed
  // reservation throws before anything visible changed.
  void compact(const std::string& key, std::uint64_t value_len) {
    const std::uint64_t from = h_.active, to = 1 - from;
    const std::uint64_t from_slots = h_.half[from].slots;
    std::uint64_t* src = table(from);
    std::uint64_t* dst = table(to);
    std::uint64_t live_bytes = 0;
    for (std::uint64_t i = 0; i < from_slots; ++i) {
      if (src[i] == kEmpty || src[i] == kTombstone) continue;
      const Record* r = record(src[i]);
      live_bytes += record_bytes(r->key_len, r->value_len);
    }
    std::uint64_t to_slots = from_slots;
    while (to_slots < h_.nslots && (h_.live + 1) * 2 > to_slots) to_slots *= 2;
    reserve(to, live_bytes, key, value_len);
    reserve_table(to, to_slots, key, value_len);
    std::memset(dst, 0, sizeof(std::uint64_t) * to_slots);
    std::uint64_t bump = 0, live = 0;
    const std::uint64_t mask = to_slots - 1;
    for (std::uint64_t i = 0; i < from_slots; ++i) {
      const std::uint64_t v = src[i];
      if (v == kEmpty || v == kTombstone) continue;
      const Record* r = record(v);
      const std::uint64_t n = record_bytes(r->key_len, r->value_len);
      const std::uint64_t offset = h_.heap_offset[to] + bump;
      std::memcpy(base_ + offset, r, n);
      bump += n;
      std::uint64_t pos = r->hash & mask;
      while (dst[pos] != kEmpty) pos = (pos + 1) & mask;
      dst[pos] = offset;
      ++live;
    }
    h_.half[to].bump = bump;
    h_.half[to].slots = to_slots;
    std::atomic_thread_fence(std::memory_order_release);
    std::atomic_ref<std::uint64_t>(h_.active).store(to, std::memory_order_release);
    h_.live = live;
    h_.tombstones = 0;
  }

  // TSan's pthread_mutex_timedlock interceptor records the lock only when it returns 0, so after
  // EOWNERDEAD (we hold the lock, its last holder died) it reports our unlock as "unlock of an
  // unlocked mutex" (seen in CI: a rank stopped while in the store, then the launcher's check()).
  // Record the acquisition ourselves; pre_lock is needed for post_lock's bookkeeping.
  void tell_tsan_the_lock_is_held() {
#if defined(__SANITIZE_THREAD__)
    __tsan_mutex_pre_lock(&h_.mutex, __tsan_mutex_try_lock);
    __tsan_mutex_post_lock(&h_.mutex, __tsan_mutex_try_lock, 0);
#endif
  }

  // A holder died inside an operation: recompute the derived counts of the active half. Every
  // slot holds kEmpty, kTombstone or a fully written record (see segment_layout.h).
  void repair() {
    std::uint64_t live = 0, tombs = 0;
    std::uint64_t* t = table(h_.active);
    for (std::uint64_t i = 0; i < slots(); ++i) {
      if (t[i] == kTombstone) ++tombs;
      else if (t[i] != kEmpty) ++live;
    }
    h_.live = live;
    h_.tombstones = tombs;
    ++h_.repairs;
    log::info("{}: a process died holding the lock of {}; state checked ({} keys)", m_.address, m_.segment, live);
  }

  Mapping& m_;
  SegmentHeader& h_;
  char* base_;
  int wake_bucket_ = -1;
};

// Wakes the futex waiters of a bucket after the lock is released.
void wake(Mapping& m, int bucket) {
  if (bucket >= 0) os::futex_wake_all(m.header->generation[bucket]);
}

}  // namespace

void initialize_segment(void* base, std::uint64_t total_bytes, std::uint64_t min_keys, const std::string& address) {
  const Layout l = plan(total_bytes, min_keys, address);
  auto* h = new (base) SegmentHeader{};
  h->version = kVersion;
  h->total_bytes = total_bytes;
  h->nslots = static_cast<std::uint32_t>(l.nslots);
  h->table_offset[0] = l.header_bytes;
  h->table_offset[1] = l.header_bytes + l.nslots * 8;
  h->heap_bytes = l.heap_bytes;
  h->heap_offset[0] = l.heaps_at;
  h->heap_offset[1] = l.heaps_at + l.heap_bytes;
  h->half[0].reserved = std::min(kFirstReserve, l.heap_bytes);  // reserve_initial's
  h->half[0].slots = l.first_slots;
  h->half[0].table_reserved = l.first_slots * 8;

  pthread_mutexattr_t attr;
  ::pthread_mutexattr_init(&attr);
  ::pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  ::pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  const int rc = ::pthread_mutex_init(&h->mutex, &attr);
  ::pthread_mutexattr_destroy(&attr);
  if (rc != 0) throw StoreError(fmt::format("{}: pthread_mutex_init: {}", address, std::strerror(rc)));
  h->magic.store(kMagic, std::memory_order_release);
}

void reserve_initial(int fd, std::uint64_t total_bytes, std::uint64_t min_keys, const std::string& address,
                     const std::string& segment) {
  const Layout l = plan(total_bytes, min_keys, address);
  const std::uint64_t first = std::min(kFirstReserve, l.heap_bytes);
  const std::uint64_t table0_end = l.header_bytes + l.first_slots * 8;
  int rc = fallocate_range(fd, 0, table0_end);  // header, what table 0 starts with
  if (rc == 0) rc = fallocate_range(fd, l.heaps_at, first);  // start of heap 0
  if (rc != 0)
    throw StoreError(fmt::format("{}: cannot reserve the first {} bytes of the {}-byte segment {}: {} (is /dev/shm "
                                 "smaller? lower FASTRUN_SHM_STORE_BYTES or enlarge /dev/shm)",
                                 address, table0_end + first, total_bytes, segment, std::strerror(rc)));
}

void ShmStore::set(const std::string& key, const Bytes& value) {
  const std::uint64_t hash = hash_key(key);
  int bucket;
  {
    Locked l(*m_, timeout());
    l.put(key, hash, value.data(), value.size());
    bucket = l.wake_bucket();
  }
  wake(*m_, bucket);
}

Bytes ShmStore::get(const std::string& key, Duration timeout) {
  const std::uint64_t hash = hash_key(key);
  const int b = bucket_of(hash);
  const auto deadline = Clock::now() + timeout;
  SegmentHeader& h = *m_->header;
  for (;;) {
    std::uint32_t gen;
    {
      Locked l(*m_, this->timeout());
      if (std::uint64_t* slot = l.find(key, hash)) {
        const Record* r = l.record(*slot);
        return Bytes(r->value(), r->value() + r->value_len);
      }
      gen = h.generation[b].load(std::memory_order_acquire);
      h.waiters[b].fetch_add(1, std::memory_order_acq_rel);
    }
    os::futex_wait(h.generation[b], gen, deadline - Clock::now());
    h.waiters[b].fetch_sub(1, std::memory_order_acq_rel);
    if (Clock::now() >= deadline && !check({key})) throw_wait_timeout(*this, {key}, 1, timeout);
  }
}

std::int64_t ShmStore::add(const std::string& key, std::int64_t delta) {
  const std::uint64_t hash = hash_key(key);
  std::int64_t v = delta;
  int bucket;
  {
    Locked l(*m_, timeout());
    if (std::uint64_t* slot = l.find(key, hash)) {
      const Record* r = l.record(*slot);
      v = parse_counter(m_->address, key, Bytes(r->value(), r->value() + r->value_len)) + delta;
    }
    const std::string text = std::to_string(v);
    l.put(key, hash, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
    bucket = l.wake_bucket();
  }
  wake(*m_, bucket);
  return v;
}

Bytes ShmStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  const std::uint64_t hash = hash_key(key);
  Bytes result;
  int bucket = -1;
  {
    Locked l(*m_, timeout());
    std::uint64_t* slot = l.find(key, hash);
    if (!slot) {
      if (!expected.empty()) return expected;
    } else {
      const Record* r = l.record(*slot);
      if (r->value_len != expected.size() ||
          (!expected.empty() && std::memcmp(r->value(), expected.data(), expected.size()) != 0))
        return Bytes(r->value(), r->value() + r->value_len);
    }
    l.put(key, hash, desired.data(), desired.size());
    bucket = l.wake_bucket();
    result = desired;
  }
  wake(*m_, bucket);
  return result;
}

void ShmStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  std::vector<std::uint64_t> hashes;
  hashes.reserve(keys.size());
  for (const auto& k : keys) hashes.push_back(hash_key(k));
  const auto deadline = Clock::now() + timeout;
  SegmentHeader& h = *m_->header;
  std::size_t next = 0;  // keys[0, next) were seen present
  for (;;) {
    int b;
    std::uint32_t gen;
    {
      Locked l(*m_, this->timeout());
      while (next < keys.size() && l.find(keys[next], hashes[next])) ++next;
      if (next == keys.size()) return;
      b = bucket_of(hashes[next]);
      gen = h.generation[b].load(std::memory_order_acquire);
      h.waiters[b].fetch_add(1, std::memory_order_acq_rel);
    }
    os::futex_wait(h.generation[b], gen, deadline - Clock::now());
    h.waiters[b].fetch_sub(1, std::memory_order_acq_rel);
    if (Clock::now() >= deadline) {
      std::vector<std::string> missing;
      {
        Locked l(*m_, this->timeout());
        for (std::size_t i = 0; i < keys.size(); ++i)
          if (!l.find(keys[i], hashes[i])) missing.push_back(keys[i]);
      }
      if (missing.empty()) return;
      throw_wait_timeout(*this, missing, keys.size(), timeout);
    }
  }
}

bool ShmStore::check(const std::vector<std::string>& keys) {
  Locked l(*m_, timeout());
  for (const auto& k : keys)
    if (!l.find(k, hash_key(k))) return false;
  return true;
}

bool ShmStore::delete_key(const std::string& key) {
  Locked l(*m_, timeout());
  return l.erase(key, hash_key(key));
}

std::int64_t ShmStore::num_keys() {
  Locked l(*m_, timeout());
  return static_cast<std::int64_t>(l.h().live);
}

std::unique_ptr<Store> ShmStore::clone() {
  auto s = std::make_unique<ShmStore>(m_);
  s->set_timeout(timeout());
  return s;
}

}  // namespace fastrun::shm_store

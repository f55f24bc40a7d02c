#pragma once
// The bytes of a shm:// store segment (/dev/shm/fastrun-NAME). Objects here are trivially
// copyable or lock-free atomics (address-free, so valid across processes).
//
//   [SegmentHeader][table 0: nslots x u64][table 1: nslots x u64][heap 0][heap 1]
//
// A table's space holds nslots slots; a half uses the first half[i].slots of its table (a power
// of two), which a compaction doubles when the live keys would fill more than half of it.
//
// Crash safety (a process SIGKILLed at any instruction inside an operation): all state is
// guarded by one robust process-shared pthread mutex, and every mutation is built so that the
// segment is consistent between any two instructions:
//  - set: advance heap[active].bump (one store), fill a fresh record in the claimed bytes,
//    then publish it with ONE release store of its offset into the key's slot. A crash before
//    the publish leaves only garbage bytes past the old bump; after it, the whole value.
//  - reservation: the creator posix_fallocates only the header, the slots table 0 starts with
//    and the first kFirstReserve bytes of heap 0 (reserving the whole segment cost ~0.5 ms per
//    MiB at creation and again at removal; the second half's table and heap, ~0.4 MiB more, cost
//    a small job a tenth of its start). Before a set or a compaction writes heap bytes past
//    half[i].reserved it fallocates the next range, and before a compaction clears table i's
//    slots it fallocates them (half[i].table_reserved bytes); each watermark is stored only AFTER
//    fallocate succeeded (a crash in between leaves the old, still true, watermark; redoing the fallocate
//    is harmless). A failed fallocate (/dev/shm full) throws before bump/slots change, so a
//    too-small /dev/shm is a clear StoreError, never a SIGBUS on a later write.
//  - delete: one store of kTombstone into the slot.
//  - compaction (heap or table full): copy the live records into the OTHER half (table +
//    heap), then flip `active` with one store. A crash before the flip leaves the old half.
//  - `live`/`tombstones` are derived counts, recomputed by repair() when the lock reports
//    EOWNERDEAD (a holder died), before pthread_mutex_consistent.
// Half-written values are therefore never visible. Blocking waits sleep on a futex (one of
// kWaitBuckets generation counters, chosen by key hash) instead of spinning.
#include <pthread.h>

#include <atomic>
#include <cstdint>

namespace fastrun::shm_store {

inline constexpr std::uint64_t kMagic = 0x31'53'54'53'52'46'41'46ull;     // "FAFRSTS1"
inline constexpr std::uint64_t kIdentMagic = 0x44'49'52'54'53'52'46'46ull;  // creator block valid
inline constexpr std::uint32_t kVersion = 4;  // 2: lazy heaps (Half::reserved); 3: lazy table 1; 4: growing tables
inline constexpr int kWaitBuckets = 64;
inline constexpr std::uint64_t kEmpty = 0;
inline constexpr std::uint64_t kTombstone = 1;
// Heap 0's bytes reserved at creation (a 2-rank join uses about 2 KiB of heap); later
// reservations at least double what a heap has, up to kReserveStep at a time, so a job of many
// ranks makes a few fallocate calls, not one per set.
inline constexpr std::uint64_t kFirstReserve = 16 * 1024;
inline constexpr std::uint64_t kReserveStep = 1024 * 1024;
// The slots a table starts with, unless the creator expects more keys (then as many as those need).
inline constexpr std::uint64_t kFirstSlots = 1024;
// Every segment this code creates is named kSegmentPrefix + NAME (store/cleanup/cleanup.cpp relies on it).
inline constexpr const char* kSegmentPrefix = "fastrun-";

struct Creator {
  std::uint64_t ident_magic;  // kIdentMagic once the fields below are written
  std::int64_t pid;
  std::uint64_t start_time;   // /proc/PID/stat field 22
  std::uint32_t uid;
  char boot_id[40];
  char host[64];
};

struct Half {
  std::uint64_t bump;            // bytes used in this half's heap
  std::uint64_t reserved;        // bytes of this heap known posix_fallocate'd (from heap_offset); >= bump
  std::uint64_t slots;           // slots this half's table uses (power of two <= nslots); 0 before its first use
  std::uint64_t table_reserved;  // bytes of this half's table known posix_fallocate'd (from table_offset)
};

struct SegmentHeader {
  std::atomic<std::uint64_t> magic;  // kMagic, stored last at creation (release)
  std::uint32_t version;
  std::uint32_t nslots;              // power of two: the slots each table has room for
  std::uint64_t total_bytes;
  std::uint64_t heap_bytes;          // size of each of the two heaps
  std::uint64_t table_offset[2];
  std::uint64_t heap_offset[2];
  Creator creator;
  pthread_mutex_t mutex;             // PTHREAD_PROCESS_SHARED + PTHREAD_MUTEX_ROBUST
  // --- guarded by mutex ---
  std::uint64_t active;              // 0 or 1
  Half half[2];
  std::uint64_t live;                // derived (repair() recomputes)
  std::uint64_t tombstones;          // derived
  std::uint64_t repairs;             // how many dead holders were repaired after (diagnostics)
  // --- futex words, touched without the mutex ---
  std::atomic<std::uint32_t> generation[kWaitBuckets];
  std::atomic<std::uint32_t> waiters[kWaitBuckets];
};

// One key/value, 8-aligned in a heap: header, key bytes, value bytes.
struct Record {
  std::uint64_t hash;
  std::uint64_t key_len;
  std::uint64_t value_len;
  const char* key() const { return reinterpret_cast<const char*>(this + 1); }
  const std::uint8_t* value() const { return reinterpret_cast<const std::uint8_t*>(this + 1) + key_len; }
};

inline std::uint64_t record_bytes(std::uint64_t key_len, std::uint64_t value_len) {
  return (sizeof(Record) + key_len + value_len + 7) & ~std::uint64_t{7};
}

}  // namespace fastrun::shm_store

#pragma once
// The stall board (docs/errors.md, "Stall report"): where the ranks of one node show, with plain
// stores, which collective each of their groups is in, so that the node's launcher can see which
// ranks a waiting group lacks without asking any rank — a rank that is SIGSTOPped, or stuck in
// compute, cannot answer, but its last stores stay readable.
//
// One shared-memory segment per node and attempt, "/fastrun-<run-id>@stall-<node>" (a job
// segment in segment_names.h's sense: the janitor and `fastrun --cleanup` remove it with the
// others), created by the launcher before any rank starts and removed when the attempt ends.
// Without a fastrun launcher (torchrun, srun, mpirun) local rank 0 of each node hosts one
// instead, as an anonymous memfd the node's other ranks open through /proc (HostedBoard below):
// no name in /dev/shm, so nothing to leave behind. A rank without a board (the report switched
// off, or a board that could not be made or opened) publishes nothing.
// Local rank r owns slots [r * kSlotsPerRank, (r + 1) * kSlotsPerRank): one per live group, for
// the first kSlotsPerRank groups alive at once (later ones are not shown). Only the owner writes
// its slots; the launcher reads them.
//
// Protocol (a seqlock): the owner makes `version` odd, writes, makes it even again; a reader
// copies a slot and keeps the copy only if `version` was even and unchanged. Every field is a
// lock-free atomic, so a read that races a write is a retry, never undefined behaviour. The
// flight recorder writes under its own lock, so a slot has one writer at a time.
// Cost per collective: about 20 relaxed stores and 4 release increments on cache lines this rank
// alone writes; no system call, no store round trip.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/process_group/op_record.h"

namespace fastrun::stall {

inline constexpr std::uint64_t kMagic = 0x31306c6c61747366;  // "fstall01"
inline constexpr int kSlotsPerRank = 16;
inline constexpr std::size_t kKeyWords = 4;  // the group's key: 32 bytes, NUL-padded

using Word = std::atomic<std::int64_t>;
static_assert(Word::is_always_lock_free, "the board is read by another process");

struct Header {
  Word magic;
  Word local_ranks;
  Word slots_per_rank;
};

// One op as the board shows it: its fingerprint (op_record.h; word 0 is its number) and when it
// began or ended, in steady_clock (CLOCK_MONOTONIC) nanoseconds, the same in every process of a
// host.
struct OpWords {
  Word words[Fingerprint::kWords];
  Word time_ns;
};

struct alignas(64) Slot {
  Word version;     // seqlock, above
  Word in_use;      // 1 while a group holds the slot
  Word key[kKeyWords];
  Word group_size;
  Word global_rank;
  OpWords begun;    // the last collective begun (words[0] == 0: none yet)
  OpWords ended;    // the highest-numbered one whose end this rank recorded
  Word ended_ok;
};

// "/fastrun-<run-id>@stall-<node>".
std::string segment_name(std::string_view run_id, int node_rank);
std::size_t segment_bytes(int local_ranks);
// Writes the header of a zeroed board of `local_ranks` ranks (the launcher, before any rank runs).
void init_board(std::byte* base, int local_ranks);

// A copy of one slot in use, as the launcher's scan (launcher/stall_scan.h) takes it.
struct SlotView {
  int local_rank = 0;
  int global_rank = 0;
  std::string group;  // the key: "<name>#<instance>"
  int group_size = 0;
  OpDesc begun;       // seq 0: no collective yet
  std::int64_t begun_ns = 0;
  OpDesc ended;       // seq 0: none ended yet
  std::int64_t ended_ns = 0;
  bool ended_ok = true;
  bool live = true;   // false: the group was destroyed since (read_rank_slots only)
};
// Every slot in use of a board of `bytes` bytes. A slot whose owner is mid-write (or was stopped
// mid-write) after a few tries is left out of this read.
std::vector<SlotView> read_board(const std::byte* base, std::size_t bytes);
// The slots of local rank `local_rank` that a group has held since the board was made, those
// freed since included (a group destroyed, or a rank that ended, keeps its ops there until the
// slot is claimed again, which takes a slot never used first): what the launcher reads for a
// failed rank's record (launcher/failure_record.h).
std::vector<SlotView> read_rank_slots(const std::byte* base, std::size_t bytes, int local_rank);

// A board hosted by a rank of a job without a fastrun launcher (runtime/join/stall_host.h). While
// a HostedBoard lives, this process's groups claim their slots on it (not on a launcher's).
class HostedBoard {
 public:
  // Local rank 0: a new board for `local_ranks` ranks. Throws SystemError when it cannot be made.
  static std::shared_ptr<HostedBoard> create(int local_ranks);
  // Another local rank: local rank 0's board, from its address(). Throws ConfigError or
  // SystemError when it cannot be opened (another user's process, /proc not mounted).
  static std::shared_ptr<HostedBoard> open(const std::string& address, int local_rank);
  ~HostedBoard();
  HostedBoard(const HostedBoard&) = delete;
  HostedBoard& operator=(const HostedBoard&) = delete;

  // "<pid> <fd>": where the node's other ranks find it (only the creator's is usable).
  const std::string& address() const { return address_; }
  const std::byte* data() const;
  std::size_t size() const;

  struct State;

 private:
  explicit HostedBoard(std::unique_ptr<State> state, std::string address);
  std::unique_ptr<State> state_;
  std::string address_;
};

// A rank's slot for one group (the flight recorder's): claimed when made, freed when destroyed.
// The methods are not thread-safe; the recorder calls them under its lock.
class RankSlot {
 public:
  // The slot of group `name` (of `group_size` members) for this process, on the live HostedBoard
  // of this process, else on the board named by FASTRUN_RUN_ID and FASTRUN_NODE_RANK, at
  // FASTRUN_LOCAL_RANK; nullptr when there is no board, the variables are unset, or this rank's
  // slots are all taken. Never throws.
  static std::unique_ptr<RankSlot> claim(const std::string& name, int group_size, int global_rank);
  ~RankSlot();
  RankSlot(const RankSlot&) = delete;
  RankSlot& operator=(const RankSlot&) = delete;

  void begun(const OpDesc& op, std::int64_t now_ns);
  void ended(const OpDesc& op, std::int64_t now_ns, bool ok);

  struct Mapping;  // the process's mapping of the board, shared by its slots

 private:
  RankSlot(std::shared_ptr<Mapping> board, Slot* slot) : board_(std::move(board)), slot_(slot) {}
  std::shared_ptr<Mapping> board_;
  Slot* slot_;
  std::int64_t ended_seq_ = 0;
};

}  // namespace fastrun::stall

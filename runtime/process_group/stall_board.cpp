#include "fastrun/runtime/process_group/stall_board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include <unistd.h>

#include <fmt/format.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/text/number.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/shm/segment_names.h"

namespace fastrun::stall {
namespace {

constexpr auto relaxed = std::memory_order_relaxed;
constexpr auto kPerRank = static_cast<std::size_t>(kSlotsPerRank);

Header* header_of(std::byte* base) { return reinterpret_cast<Header*>(base); }
const Header* header_of(const std::byte* base) { return reinterpret_cast<const Header*>(base); }
std::size_t slots_offset() { return (sizeof(Header) + alignof(Slot) - 1) / alignof(Slot) * alignof(Slot); }
Slot* slot_at(std::byte* base, std::size_t i) { return reinterpret_cast<Slot*>(base + slots_offset()) + i; }
const Slot* slot_at(const std::byte* base, std::size_t i) {
  return reinterpret_cast<const Slot*>(base + slots_offset()) + i;
}

void write_op(OpWords& w, const OpDesc& op, std::int64_t ns) {
  const Fingerprint f = fingerprint(op);
  for (std::size_t i = 0; i < Fingerprint::kWords; ++i) w.words[i].store(f.words[i], relaxed);
  w.time_ns.store(ns, relaxed);
}

OpDesc read_op(const OpWords& w, std::int64_t& ns) {
  Fingerprint f;
  for (std::size_t i = 0; i < Fingerprint::kWords; ++i) f.words[i] = w.words[i].load(relaxed);
  ns = w.time_ns.load(relaxed);
  return from_fingerprint(f);
}

// The seqlock's write side: version odd for the duration of the object.
class Writing {
 public:
  explicit Writing(Slot& s) : s_(s) {
    s_.version.fetch_add(1, relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // the odd version before the data
  }
  ~Writing() { s_.version.fetch_add(1, std::memory_order_release); }  // the data before the even one
  Writing(const Writing&) = delete;
  Writing& operator=(const Writing&) = delete;

 private:
  Slot& s_;
};

}  // namespace

std::string segment_name(std::string_view run_id, int node_rank) {
  return "/" + shm_store::job_segment_prefix(run_id) + "stall-" + std::to_string(node_rank);
}

std::size_t segment_bytes(int local_ranks) {
  return slots_offset() + sizeof(Slot) * static_cast<std::size_t>(local_ranks) * kSlotsPerRank;
}

void init_board(std::byte* base, int local_ranks) {
  Header* h = header_of(base);
  h->local_ranks.store(local_ranks, relaxed);
  h->slots_per_rank.store(kSlotsPerRank, relaxed);
  h->magic.store(static_cast<std::int64_t>(kMagic), std::memory_order_release);
}

namespace {

// The slot count of a board of `bytes` bytes, 0 when it is not a board (yet).
std::size_t slot_count(const std::byte* base, std::size_t bytes) {
  const Header* h = header_of(base);
  if (bytes < slots_offset() || h->magic.load(std::memory_order_acquire) != static_cast<std::int64_t>(kMagic))
    return 0;
  const std::int64_t ranks = h->local_ranks.load(relaxed);
  const std::int64_t per_rank = h->slots_per_rank.load(relaxed);
  if (ranks < 0 || per_rank != kSlotsPerRank || segment_bytes(static_cast<int>(ranks)) > bytes) return 0;
  return static_cast<std::size_t>(ranks * per_rank);
}

// A copy of slot i into `view`, when a group holds it (or, with `freed_too`, held it since the
// board was made); false when not, or when its owner stayed mid-write for a few tries.
bool read_slot(const std::byte* base, std::size_t i, bool freed_too, SlotView& view) {
  const Slot& s = *slot_at(base, i);
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::int64_t v = s.version.load(std::memory_order_acquire);
    if (v % 2 != 0) continue;
    const std::int64_t in_use = s.in_use.load(relaxed);
    // A slot never claimed has an empty key; a freed one keeps its group's key and ops.
    if (in_use != 1 && !(freed_too && in_use == 0 && s.key[0].load(relaxed) != 0)) return false;
    view.local_rank = static_cast<int>(i / kPerRank);
    view.live = in_use == 1;
    char key[kKeyWords * sizeof(std::int64_t) + 1] = {};
    for (std::size_t k = 0; k < kKeyWords; ++k) {
      const std::int64_t word = s.key[k].load(relaxed);
      std::memcpy(key + k * sizeof word, &word, sizeof word);
    }
    view.group = key;
    view.group_size = static_cast<int>(s.group_size.load(relaxed));
    view.global_rank = static_cast<int>(s.global_rank.load(relaxed));
    view.begun = read_op(s.begun, view.begun_ns);
    view.ended = read_op(s.ended, view.ended_ns);
    view.ended_ok = s.ended_ok.load(relaxed) != 0;
    std::atomic_thread_fence(std::memory_order_acquire);  // the data before the second version read
    if (s.version.load(relaxed) == v) return true;
  }
  return false;
}

}  // namespace

std::vector<SlotView> read_board(const std::byte* base, std::size_t bytes) {
  std::vector<SlotView> out;
  const std::size_t n = slot_count(base, bytes);
  for (std::size_t i = 0; i < n; ++i) {
    SlotView view;
    if (read_slot(base, i, false, view)) out.push_back(std::move(view));
  }
  return out;
}

std::vector<SlotView> read_rank_slots(const std::byte* base, std::size_t bytes, int local_rank) {
  std::vector<SlotView> out;
  const std::size_t n = slot_count(base, bytes);
  const auto first = static_cast<std::size_t>(std::max(local_rank, 0)) * kPerRank;
  for (std::size_t i = first; i < std::min(n, first + kPerRank); ++i) {
    SlotView view;
    if (read_slot(base, i, true, view)) out.push_back(std::move(view));
  }
  return out;
}

// ---------------------------------------------------------------- the rank's side

struct RankSlot::Mapping {
  std::byte* base = nullptr;
  std::size_t bytes = 0;
  int local_rank = 0;
  Mapping(std::byte* b, std::size_t n, int r) : base(b), bytes(n), local_rank(r) {}
  ~Mapping() { ::munmap(base, bytes); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
};

namespace {
std::mutex g_mutex;
std::weak_ptr<RankSlot::Mapping> g_board;       // this process's mapping while a slot uses it
std::map<std::string, int> g_instances;          // groups made per name: equal on every member

// Maps the board open as `fd` for local rank `local_rank`; nullptr (and why, in `why`) when it is
// not a board with a place for that rank.
std::shared_ptr<RankSlot::Mapping> map_fd(int fd, int local_rank, std::string& why) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < slots_offset()) {
    why = "too small for a board";
    return nullptr;
  }
  const auto bytes = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    why = std::string("mmap: ") + std::strerror(errno);
    return nullptr;
  }
  auto m = std::make_shared<RankSlot::Mapping>(static_cast<std::byte*>(p), bytes, local_rank);
  const Header* h = header_of(m->base);
  if (h->magic.load(std::memory_order_acquire) != static_cast<std::int64_t>(kMagic) ||
      h->slots_per_rank.load(relaxed) != kSlotsPerRank || local_rank >= h->local_ranks.load(relaxed) ||
      segment_bytes(static_cast<int>(h->local_ranks.load(relaxed))) > bytes) {
    why = fmt::format("not a board for local rank {}", local_rank);
    return nullptr;
  }
  return m;
}

// Maps the board named by this rank's environment; nullptr when there is none.
std::shared_ptr<RankSlot::Mapping> map_board() {
  const auto run_id = env::find_string(env::kRunId);
  const auto local_rank = env::find_int(env::kLocalRank);
  if (!run_id || run_id->empty() || !local_rank) return nullptr;
  const std::string name = segment_name(*run_id, static_cast<int>(env::get_int(env::kNodeRank)));
  const os::UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd) return nullptr;  // no launcher board: the stall report is off or not fastrun's job
  std::string why;
  auto m = map_fd(fd.get(), static_cast<int>(*local_rank), why);
  if (!m) log::debug("stall board {}: {}; the stall report leaves this rank out", name, why);
  return m;
}
}  // namespace

// ---------------------------------------------------------------- a board hosted by a rank

struct HostedBoard::State {
  os::UniqueFd fd;  // the creator's: what /proc/<pid>/fd/<fd> names for the others
  std::shared_ptr<RankSlot::Mapping> mapping;
};

HostedBoard::HostedBoard(std::unique_ptr<State> state, std::string address)
    : state_(std::move(state)), address_(std::move(address)) {
  // From now on this process's groups claim their slots here.
  std::lock_guard lock(g_mutex);
  g_board = state_->mapping;
}

HostedBoard::~HostedBoard() = default;  // slots still claimed keep the mapping (they share it)

const std::byte* HostedBoard::data() const { return state_->mapping->base; }
std::size_t HostedBoard::size() const { return state_->mapping->bytes; }

std::shared_ptr<HostedBoard> HostedBoard::create(int local_ranks) {
  auto state = std::make_unique<State>();
  // Anonymous: no name that a SIGKILLed host could leave in /dev/shm.
  state->fd.reset(::memfd_create("fastrun-stall-board", MFD_CLOEXEC));
  if (!state->fd) throw_errno("memfd_create for the stall board", errno);
  const std::size_t bytes = segment_bytes(local_ranks);
  if (::ftruncate(state->fd.get(), static_cast<off_t>(bytes)) != 0) throw_errno("ftruncate of the stall board", errno);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, state->fd.get(), 0);
  if (p == MAP_FAILED) throw_errno("mmap of the stall board", errno);
  state->mapping = std::make_shared<RankSlot::Mapping>(static_cast<std::byte*>(p), bytes, 0);
  init_board(state->mapping->base, local_ranks);
  std::string address = fmt::format("{} {}", ::getpid(), state->fd.get());
  return std::shared_ptr<HostedBoard>(new HostedBoard(std::move(state), std::move(address)));
}

std::shared_ptr<HostedBoard> HostedBoard::open(const std::string& address, int local_rank) {
  const auto space = address.find(' ');
  if (space == std::string::npos) throw ConfigError(fmt::format("stall board address '{}': accepted: '<pid> <fd>'", address));
  const auto pid = text::parse_integer("the stall board's pid", address.substr(0, space), 1, INT32_MAX);
  const auto fd_number = text::parse_integer("the stall board's fd", address.substr(space + 1), 0, INT32_MAX);
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd_number);
  auto state = std::make_unique<State>();
  const os::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) throw_errno("open " + path, errno);
  std::string why;
  state->mapping = map_fd(fd.get(), local_rank, why);
  if (!state->mapping) throw ConfigError(fmt::format("stall board {}: {}", path, why));
  return std::shared_ptr<HostedBoard>(new HostedBoard(std::move(state), address));
}

std::unique_ptr<RankSlot> RankSlot::claim(const std::string& name, int group_size, int global_rank) {
  try {
    std::lock_guard lock(g_mutex);
    std::shared_ptr<Mapping> board = g_board.lock();
    if (!board) board = map_board();
    if (!board) return nullptr;
    g_board = board;
    // The key tells two groups of one name apart (a second join's 'world'): the members make
    // their groups in the same order, so the count is the same on every member.
    const std::string key = name + "#" + std::to_string(++g_instances[name]);
    // A slot never used first: a freed one keeps its last group's ops for the failure record
    // (read_rank_slots) as long as there is another.
    const auto first = static_cast<std::size_t>(board->local_rank) * kPerRank;
    for (std::size_t n = 0; n < 2 * kPerRank; ++n) {
      Slot& s = *slot_at(board->base, first + n % kPerRank);
      if (n < kPerRank && s.key[0].load(relaxed) != 0) continue;
      std::int64_t free = 0;
      if (!s.in_use.compare_exchange_strong(free, 2, std::memory_order_acquire)) continue;  // 2: being filled
      {
        const Writing w(s);
        char text[kKeyWords * sizeof(std::int64_t)] = {};
        std::memcpy(text, key.data(), std::min(key.size(), sizeof text - 1));
        for (std::size_t k = 0; k < kKeyWords; ++k) {
          std::int64_t word = 0;
          std::memcpy(&word, text + k * sizeof word, sizeof word);
          s.key[k].store(word, relaxed);
        }
        s.group_size.store(group_size, relaxed);
        s.global_rank.store(global_rank, relaxed);
        write_op(s.begun, OpDesc{}, 0);
        write_op(s.ended, OpDesc{}, 0);
        s.ended_ok.store(1, relaxed);
        s.in_use.store(1, relaxed);
      }
      return std::unique_ptr<RankSlot>(new RankSlot(std::move(board), &s));
    }
    log::debug("stall board: local rank {} has {} groups already; group '{}' is not shown", board->local_rank,
               kSlotsPerRank, name);
  } catch (const std::exception& e) {
    log::debug("stall board: group '{}' is not shown: {}", name, e.what());
  }
  return nullptr;
}

RankSlot::~RankSlot() {
  const Writing w(*slot_);
  slot_->in_use.store(0, relaxed);
}

void RankSlot::begun(const OpDesc& op, std::int64_t now_ns) {
  const Writing w(*slot_);
  write_op(slot_->begun, op, now_ns);
}

void RankSlot::ended(const OpDesc& op, std::int64_t now_ns, bool ok) {
  if (op.seq < ended_seq_) return;  // handles waited out of order: keep the latest op
  ended_seq_ = op.seq;
  const Writing w(*slot_);
  write_op(slot_->ended, op, now_ns);
  slot_->ended_ok.store(ok ? 1 : 0, relaxed);
}

}  // namespace fastrun::stall

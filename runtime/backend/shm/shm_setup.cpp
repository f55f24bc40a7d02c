// Set-up of an shm group: one straight-line function (make_shm_backend), numbered steps.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>

#include <atomic>
#include <chrono>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "fastrun/runtime/backend/shm/shm_backend.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/host.h"
#include "fastrun/runtime/os/safe_name.h"
#include "fastrun/runtime/store/shm/segment_names.h"

namespace fastrun::shm {
namespace {

constexpr const char* kSegmentKey = "shm/segment";
constexpr const char* kMappedBarrier = "shm/mapped";

std::string sanitize(const std::string& s, std::size_t max_len) {
  std::string out;
  for (char c : s) {
    out.push_back(os::is_name_char(c) ? c : '_');
    if (out.size() >= max_len) break;
  }
  return out.empty() ? "x" : out;
}

// "/fastrun-<run id>@<group>-<pid>-<random>": names the job and group for whoever lists
// /dev/shm ('@' ends the run id, segment_names.h); the pid and random part keep concurrent
// groups and reruns apart.
std::string segment_name(const GroupSpec& spec) {
  std::random_device rd;
  return fmt::format("/{}{}-{}-{:08x}",
                     shm_store::job_segment_prefix(sanitize(spec.run_id.empty() ? "norun" : spec.run_id, 80)),
                     sanitize(spec.name, 60), ::getpid(), rd());
}

// The mailboxes' segment (p2p_engine.h), named after the group's: the other ranks derive it.
std::string mailbox_segment_name(const std::string& segment) { return segment + "-p2p"; }

// Identifies this machine (and its /dev/shm): ranks on other nodes cannot open the segment.
std::string node_id() {
  return os::host_name().value_or("") + "/" + os::boot_id();
}

// This process's CPU affinity, bit c = CPU c (empty if the kernel's mask is larger than
// cpu_set_t: then the group counts as having one CPU, as it did before the masks were shared).
using CpuMask = std::array<std::uint64_t, kAffinityWords>;
CpuMask own_cpus() {
  static_assert(sizeof(cpu_set_t) == sizeof(CpuMask));
  CpuMask mask{};
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return mask;
  for (std::size_t c = 0; c < kAffinityWords * 64; ++c)
    if (CPU_ISSET(c, &set)) mask[c / 64] |= std::uint64_t{1} << (c % 64);
  return mask;
}
int count(const CpuMask& mask) {
  int n = 0;
  for (std::uint64_t w : mask) n += std::popcount(w);
  return std::max(n, 1);
}

SegmentHeader& header(const Segment& seg) { return *reinterpret_cast<SegmentHeader*>(seg.data()); }
RankControl& control(const Segment& seg, const Layout& layout, int rank) {
  return *reinterpret_cast<RankControl*>(seg.data() + layout.control_offset(static_cast<std::size_t>(rank)));
}

}  // namespace

Layout shm_layout(int nranks, int cpus) {
  Layout l;
  l.nranks = static_cast<std::size_t>(nranks);
  const bool oversubscribed = nranks > cpus;
  l.region_bytes = oversubscribed ? kOversubscribedRegionBytes : kRegionBytes;
  l.ring = std::max<std::size_t>(kMinRing, (oversubscribed ? kOversubscribedRingBytesPerRank : kRingBytesPerRank) / l.region_bytes);
  while (l.ring > kMinRing && l.total_bytes() > kMaxSegmentBytes) l.ring /= 2;
  while (l.region_bytes > kSmallAllReduceBytes && l.total_bytes() > kMaxSegmentBytes) l.region_bytes /= 2;
  return l;
}

std::unique_ptr<Backend> make_shm_backend(const GroupSpec& spec) { return make_shm_backend_yielding(spec, {}); }

std::unique_ptr<Backend> make_shm_backend_yielding(const GroupSpec& spec, std::chrono::microseconds yield_for) {
  const auto t0 = std::chrono::steady_clock::now();
  // 1. Check the spec. A group of one needs no segment and no store.
  if (spec.size < 1 || spec.rank < 0 || spec.rank >= spec.size)
    throw ConfigError(fmt::format("shm backend: rank {} of size {} for group '{}': need 0 <= rank < size >= 1",
                                  spec.rank, spec.size, spec.name));
  if (spec.size == 1) return std::make_unique<ShmBackend>(spec, nullptr);
  if (!spec.store)
    throw ConfigError(fmt::format("shm backend: group '{}' of {} ranks has no store to rendezvous through",
                                  spec.name, spec.size));
  // Rank 0 sizes the regions before the others have come: by its own affinity (a rank bound to
  // one core sizes them as for shared cores, a choice of speed only; the waits go by the union
  // of every rank's, step 3).
  const CpuMask mine = own_cpus();
  Layout layout = shm_layout(spec.size, count(mine));
  const std::string node = node_id();

  // 2. Rank 0 creates and initialises the segment and the mailboxes' (named after it), then
  //    publishes the segment's name; the others open both.
  Segment seg;
  std::optional<MailboxSetup> mailboxes;
  if (spec.rank == 0) {
    // Only the header, control blocks and fingerprints now: each rank reserves its own regions
    // at its first write (Channel::before_write).
    seg = Segment::create(segment_name(spec), layout.total_bytes(), layout.data_offset());
    SegmentHeader& h = header(seg);
    h.version = kLayoutVersion;
    h.nranks = static_cast<std::uint32_t>(spec.size);
    h.region_bytes = layout.region_bytes;
    h.total_bytes = layout.total_bytes();
    h.ring = static_cast<std::uint32_t>(layout.ring);
    std::atomic_ref<std::uint64_t>(h.magic).store(kSegmentMagic, std::memory_order_release);
    mailboxes.emplace(MailboxSetup::create(spec, mailbox_segment_name(seg.name())));
    spec.store->set(kSegmentKey, to_bytes(seg.name() + "\n" + node));
  } else {
    const std::string value = to_string(spec.store->get(kSegmentKey, spec.timeout));
    const auto nl = value.find('\n');
    const std::string name = value.substr(0, nl);
    const std::string their_node = nl == std::string::npos ? "" : value.substr(nl + 1);
    if (their_node != node)
      throw ConfigError(fmt::format("shm backend: group '{}' spans nodes (rank 0 is on '{}', rank {} on '{}'); "
                                    "shm works on one node only: use backend gloo",
                                    spec.name, their_node, spec.rank, node));
    seg = Segment::open(name, sizeof(SegmentHeader));
    const SegmentHeader& h = header(seg);
    if (std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(h.magic)).load(std::memory_order_acquire) !=
            kSegmentMagic ||
        h.version != kLayoutVersion || h.nranks != static_cast<std::uint32_t>(spec.size))
      throw BackendError(fmt::format("shm backend: segment '{}' of group '{}' has an unexpected header (version {}, "
                                     "{} ranks; expected {}, {}): mixed fastrun builds?",
                                     name, spec.name, h.version, h.nranks, kLayoutVersion, spec.size));
    layout.region_bytes = h.region_bytes;  // rank 0's choice
    layout.ring = h.ring;
    if (layout.total_bytes() != h.total_bytes || h.total_bytes != seg.size() || layout.ring < kMinRing ||
        (layout.ring & (layout.ring - 1)) != 0 ||  // step % ring must survive the step counter's wrap
        layout.region_bytes < kSmallAllReduceBytes)
      throw BackendError(fmt::format("shm backend: segment '{}' of group '{}' is inconsistent ({} bytes mapped, "
                                     "header says {} bytes of {} x {}-byte regions)",
                                     name, spec.name, seg.size(), h.total_bytes, h.ring, h.region_bytes));
    mailboxes.emplace(MailboxSetup::open(spec, mailbox_segment_name(name)));
  }

  // 3. Everyone records its pid (in both segments), then waits until all have mapped them and
  //    removes the names: from here on nothing is left in /dev/shm whatever happens to the ranks.
  //    Each also leaves its CPU affinity, so that after the barrier every rank knows how many
  //    cores the group has between them: ranks bound to one core each (`fastrun --bind core`,
  //    `mpirun --bind-to core`) see one CPU of their own, and must not take that for shared cores.
  RankControl& me = control(seg, layout, spec.rank);
  me.pid = static_cast<std::int32_t>(::getpid());
  std::copy(mine.begin(), mine.end(), me.affinity);
  mailboxes->record_self(spec.rank);
  try {
    store_barrier(*spec.store, kMappedBarrier, spec.rank, spec.size, spec.timeout);
  } catch (...) {
    seg.unlink();
    mailboxes->unlink();
    throw;
  }
  seg.unlink();
  mailboxes->unlink();
  CpuMask all{};
  for (int r = 0; r < spec.size; ++r) {
    const RankControl& peer = control(seg, layout, r);
    for (std::size_t w = 0; w < kAffinityWords; ++w) all[w] |= peer.affinity[w];
  }
  const int cpus = count(all);

  // 4. The channel watches every peer's liveness from now on; the mailboxes (point-to-point)
  //    probe single-copy reads and start.
  ChannelInfo info{spec.rank, spec.size, spec.global_ranks, spec.name, cpus, yield_for};
  // The group's one failure watch (group_health.h): the channel's waits poll it.
  auto health = std::make_shared<GroupHealth>(spec, "shm", /*watch_peers=*/false);
  auto chan = std::make_unique<Channel>(std::move(seg), layout, std::move(info), health->watch());
  chan->watch_peers();
  log::info("shm group '{}': rank {} of {} ready in {:.1f} ms ({} x {} KiB regions per rank, {} CPUs between the ranks)",
            spec.name, spec.rank, spec.size,
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(), layout.ring,
            layout.region_bytes / 1024, cpus);
  auto group = std::make_unique<ShmBackend>(spec, std::move(chan), std::move(health));
  group->start_p2p(spec, std::move(*mailboxes));
  return group;
}

}  // namespace fastrun::shm

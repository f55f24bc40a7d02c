#pragma once
// The "bare" column of `fastrun-bench p2p`: the same bytes as a row's exchange, moved by the same
// ranks in the same minutes with nothing but memcpy through one shared mapping and a counter per
// rank (no matching, protocol, checks or Work). Where the cores exchange data at speeds that
// change between runs (a VM whose host moves its vCPUs: the development VM's differ by up to 4x,
// docs/benchmarks.md, "The bare column"), a row's time/bare shows what fastrun adds to that
// moment's machine; time/mpi compares with Open MPI's run of the op, made just before fastrun's,
// which the machine may have run at another speed.
//
// Each sender copies a block into its region for (sender, receiver), the receiver copies it
// out: two copies per block, as an eager message through a ring. A region is reused by the
// next op once its receiver has taken this one's (the counters), so a row's ops run in step.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace fastrun::bench {

class BareExchange {
 public:
  // Maps the shared area before the ranks fork: a counter line per rank and a region per ordered
  // pair of ranks, each of up to `max_block` bytes (virtual, at most kMaxBytes in all: pages
  // exist once written, so a row uses memory for the pairs its op uses).
  BareExchange(int nproc, std::size_t max_block);
  ~BareExchange();
  BareExchange(const BareExchange&) = delete;
  BareExchange& operator=(const BareExchange&) = delete;

  // Whether regions of `block` bytes fit the mapping (rows that do not are left out).
  bool fits(std::size_t block) const;

  struct Block {
    int peer;
    void* data;  // a send's source, a recv's destination
    std::size_t bytes;
  };
  struct Local {  // the rank's own block, input to output
    void* dst = nullptr;
    const void* src = nullptr;
    std::size_t bytes = 0;
  };
  // One op of rank `rank`: the sends, then `local` (the rank's own block), then the recvs; with
  // `recv_first` the recvs come first (the answering side of a ping-pong). `block`: the row's
  // largest block (fits()). Throws after 60 s without a peer's counter, naming the peer.
  void run(int rank, std::span<const Block> sends, std::span<const Block> recvs, Local local, std::size_t block,
           bool recv_first = false);
  // Starts a row: every rank calls it between two barriers (its counters back to 0; no rank
  // reads another's between the barriers).
  void reset(int rank);

  static constexpr std::size_t kMaxBytes = std::size_t{1} << 30;

 private:
  struct alignas(64) Counters {
    std::atomic<std::uint64_t> posted{0};  // ops whose sends this rank has written
    std::atomic<std::uint64_t> taken{0};   // ops whose recvs this rank has copied out
  };
  std::byte* region(int from, int to, std::size_t block) const;
  void await(const std::atomic<std::uint64_t>& counter, std::uint64_t value, int peer, const char* what) const;

  int nproc_;
  std::size_t bytes_ = 0;  // the mapping: counters, then the regions
  std::size_t region_bytes_ = 0;
  void* map_ = nullptr;
  Counters* counters_ = nullptr;
  std::byte* regions_ = nullptr;
  bool yield_ = false;    // more ranks than CPUs: a waiter gives its CPU up instead of spinning
  std::uint64_t op_ = 0;  // this rank's ops in the current row
};

}  // namespace fastrun::bench

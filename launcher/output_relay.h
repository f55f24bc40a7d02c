#pragma once
// The output relay (docs/launching.md, "Output"): turns the bytes read from each rank's stdout and stderr
// pipes into whole lines on the launcher's terminal, and files them byte for byte under
// --log-dir. Reading the pipes is the supervisor's job; the relay only assembles and writes.
//
// Contracts: every terminal write holds whole lines only, so lines of different ranks are never
// spliced; a rank's final partial line is delivered (with a newline added on the terminal) when
// its stream closes; a line that grows past kMaxLine bytes is cut there (a newline is added on
// the terminal) so that memory stays bounded. Files get exactly
// the bytes the rank wrote. Threading: one thread (the supervisor's) calls everything.
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "fastrun/launcher/job_config.h"
#include "fastrun/runtime/os/unique_fd.h"

namespace fastrun::launcher {

struct RelayOptions {
  OutputMode output = OutputMode::all;  // what ranks other than 0 show on the terminal
  bool tag_output = false;              // "[rank r] " before every terminal line
  std::string log_dir;                  // DIR/<run-id>; "" = no files
  int terminal_out = 1;                 // where stdout lines go
  int terminal_err = 2;                 // where stderr lines go
  int rank_offset = 0;                  // ranks are local; names (rank-<r>, tags) are global
};

enum class Stream { out = 0, err = 1 };

class OutputRelay {
 public:
  static constexpr std::size_t kMaxLine = 1 << 20;
  static constexpr std::size_t kTailLines = 10;

  explicit OutputRelay(RelayOptions options);

  // Registers a rank; with a log dir, creates DIR/rank-<r>/{stdout,stderr}.log (the files must
  // not exist yet). Throws Error naming the path when that fails.
  void add_rank(int rank);
  void feed(int rank, Stream stream, const char* data, std::size_t size);
  // End of the stream (EOF, or the rank is gone): delivers the final partial line.
  void close_stream(int rank, Stream stream);

  // The last kTailLines lines of the rank's stderr (for the failure summary).
  std::vector<std::string> stderr_tail(int rank) const;
  // "DIR/rank-<r>" or "" without --log-dir.
  std::string rank_log_dir(int rank) const;
  // The reader of the terminal stdout or stderr went away (a write failed with EPIPE, e.g.
  // `fastrun ... | head -1`). From then on nothing more is written there.
  bool console_closed() const { return console_closed_; }

 private:
  struct StreamState {
    std::string partial;   // bytes after the last newline
    os::UniqueFd file;
  };
  struct RankState {
    StreamState streams[2];
    std::deque<std::string> tail;
  };
  bool shown(int rank, Stream s) const;
  void emit(int rank, Stream s, const char* data, std::size_t size);  // whole lines, each ending in '\n'
  void remember_tail(RankState& st, const char* data, std::size_t size);
  void note_terminal_write(int idx, bool ok);

  RelayOptions options_;
  std::map<int, RankState> ranks_;
  bool terminal_ok_[2] = {true, true};
  bool console_closed_ = false;
  std::string scratch_;
};

}  // namespace fastrun::launcher

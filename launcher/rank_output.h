#pragma once
// Moves what a rank writes from the read ends of its pipes (rank_process.h) into the relay
// (output_relay.h), and closes a stream once it is done.
// Threading: the supervisor's thread only.
#include "fastrun/launcher/event_set.h"
#include "fastrun/launcher/output_relay.h"
#include "fastrun/launcher/rank_process.h"

namespace fastrun::launcher {

class RankOutput {
 public:
  RankOutput(OutputRelay& relay, EventSet& events) : relay_(relay), events_(events) {}

  // Reads what is there: a few reads per event, which keeps ranks fair (level-triggered epoll
  // calls again while data is left). until_empty (the rank is gone): reads to EOF or EAGAIN.
  // At EOF, on an error, or once emptied, the stream is unwatched, closed and its partial line
  // delivered.
  void read(RankProcess& rk, Stream s, bool until_empty);

  // Takes what is in both pipes and closes the relay's streams, but leaves the fds open until
  // the process ends (rank 0 of launch_self, still running: closing them could kill it with
  // SIGPIPE).
  void drain_without_closing(RankProcess& rk);

 private:
  OutputRelay& relay_;
  EventSet& events_;
  char buf_[65536];
};

}  // namespace fastrun::launcher

#include "fastrun/launcher/rank_output.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace fastrun::launcher {

void RankOutput::read(RankProcess& rk, Stream s, bool until_empty) {
  os::UniqueFd& fd = s == Stream::out ? rk.out : rk.err;
  if (!fd) return;
  for (int reads = 0; until_empty || reads < 4; ++reads) {
    const ssize_t n = ::read(fd.get(), buf_, sizeof buf_);
    if (n > 0) {
      relay_.feed(rk.rank, s, buf_, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !until_empty) return;
    // EOF, an error, or (until_empty) nothing left: the stream is done.
    events_.unwatch(fd.get());
    fd.reset();
    relay_.close_stream(rk.rank, s);
    return;
  }
}

void RankOutput::drain_without_closing(RankProcess& rk) {
  for (auto [fd, s] : {std::pair{&rk.out, Stream::out}, std::pair{&rk.err, Stream::err}}) {
    if (!*fd) continue;
    ssize_t n;
    while ((n = ::read(fd->get(), buf_, sizeof buf_)) > 0) relay_.feed(rk.rank, s, buf_, static_cast<std::size_t>(n));
    relay_.close_stream(rk.rank, s);
    (void)fd->release();  // deliberately left open until the process ends
  }
}

}  // namespace fastrun::launcher

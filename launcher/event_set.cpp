#include "fastrun/launcher/event_set.h"

#include <sys/epoll.h>

#include <cerrno>

#include "fastrun/runtime/error.h"

namespace fastrun::launcher {

// An entry's tag: the kind in the high half, the rank in the low half.
static std::uint64_t event_tag(EventSet::Kind kind, int rank) {
  return (std::uint64_t{static_cast<std::uint32_t>(kind)} << 32) | static_cast<std::uint32_t>(rank);
}

EventSet::EventSet() : epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (!epoll_) throw_errno("epoll_create1", errno);
}

void EventSet::watch(int fd, Kind kind, int rank) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = event_tag(kind, rank);
  check_syscall(::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev), "epoll_ctl");
}

void EventSet::unwatch(int fd) { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

int EventSet::wait(Event (&events)[kMaxEvents], int timeout_ms) {
  epoll_event ready[kMaxEvents];
  const int n = ::epoll_wait(epoll_.get(), ready, kMaxEvents, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return 0;
    throw_errno("epoll_wait", errno);
  }
  for (int i = 0; i < n; ++i) {
    events[i].kind = static_cast<Kind>(ready[i].data.u64 >> 32);
    events[i].rank = static_cast<int>(ready[i].data.u64 & 0xffffffffu);
  }
  return n;
}

}  // namespace fastrun::launcher

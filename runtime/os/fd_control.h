#pragma once
// Checked fcntl and dup2: the two fd-control calls whose failure used to be ignored (a relay pipe
// left blocking, a rank's stdio left pointing at the wrong file). Each retries EINTR and throws
// fastrun::Error naming the fd, the command and the errno text, plus what the fd is for.
#include <string_view>

namespace fastrun::os {

// fcntl(fd, cmd, arg) for the integer-argument commands (F_GETFL, F_SETFL, F_GETFD, F_SETFD,
// F_DUPFD, F_DUPFD_CLOEXEC, ...). Returns fcntl's result. `what` says what the fd is for
// ("rank 3's stdout pipe"); it may be empty.
int checked_fcntl(int fd, int cmd, long arg = 0, std::string_view what = {});

// Adds O_NONBLOCK to fd's status flags, keeping the others (F_GETFL, then F_SETFL).
void set_nonblocking(int fd, std::string_view what = {});

// dup2(from, to): `to` now names what `from` names. EBUSY (a racing open on Linux) is retried
// like EINTR.
void checked_dup2(int from, int to, std::string_view what = {});

}  // namespace fastrun::os

#pragma once
// `fastrun --cleanup`: removes the /dev/shm segments of jobs whose owner died (a SIGKILLed
// launcher, or rank 0 of an in-process spawn killed by a signal). Returns the exit status.
#include <cstdio>

namespace fastrun::launcher {

int run_stale_cleanup(std::FILE* out, std::FILE* err);

}  // namespace fastrun::launcher

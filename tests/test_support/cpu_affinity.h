#pragma once
// The calling thread's CPU affinity as a list of CPU numbers, read and set (sched_*affinity):
// for tests that bind ranks or threads to CPUs. Set fails (false) on a CPU the thread may not
// use; the caller asserts in its own way (REQUIRE in the test process, expect in a rank).
#include <sched.h>

#include <vector>

namespace fastrun::test {

// The CPUs this thread may run on, ascending; empty if they cannot be read.
inline std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// Restricts this thread to `cpus`; false when the kernel refuses.
inline bool set_allowed_cpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

}  // namespace fastrun::test

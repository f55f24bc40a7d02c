#include "fastrun/launcher/binding/apply_binding.h"

#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::launcher {
namespace {

constexpr std::size_t kBits = sizeof(unsigned long) * CHAR_BIT;

std::vector<unsigned long> mask_of(const std::vector<int>& bits) {
  std::vector<unsigned long> mask;
  for (int b : bits) {
    const auto i = static_cast<std::size_t>(b);
    if (mask.size() <= i / kBits) mask.resize(i / kBits + 1, 0);
    mask[i / kBits] |= 1UL << (i % kBits);
  }
  return mask;
}

}  // namespace

ChildBinding child_binding(const RankBinding& binding) {
  ChildBinding c;
  c.cpu_mask = mask_of(binding.cpus);
  if (binding.memory_node >= 0) c.node_mask = mask_of({binding.memory_node});
  return c;
}

int apply_child_binding(const ChildBinding& b, const char** failed) {
  if (!b.cpu_mask.empty() &&
      ::sched_setaffinity(0, b.cpu_mask.size() * sizeof(unsigned long),
                          reinterpret_cast<const cpu_set_t*>(b.cpu_mask.data())) != 0) {
    *failed = "sched_setaffinity";
    return errno;
  }
  // MPOL_PREFERRED, not MPOL_BIND: memory comes from the node while it has some, and from
  // another node after that instead of the rank being killed for want of memory (docs/binding.md).
  // maxnode is one more than the mask's bits: the kernel counts one bit fewer (set_mempolicy(2)).
  if (!b.node_mask.empty() && ::syscall(SYS_set_mempolicy, MPOL_PREFERRED, b.node_mask.data(),
                                        b.node_mask.size() * kBits + 1) != 0) {
    *failed = "set_mempolicy";
    return errno;
  }
  return 0;
}

void bind_calling_thread(const RankBinding& binding) {
  const char* failed = "";
  if (const int err = apply_child_binding(child_binding(binding), &failed))
    throw_errno(fmt::format("binding local rank {}: {}", binding.local_rank, failed), err);
}

}  // namespace fastrun::launcher

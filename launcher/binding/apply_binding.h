#pragma once
// Putting a planned binding into effect on a process (docs/binding.md). For a spawned rank it
// happens in the child between fork and exec (spawn.h): the affinity and the memory policy
// both survive exec, so the program and every thread it starts run bound from their first
// instruction. The masks are built in the parent, so that the child only makes two system calls.
#include <string>
#include <vector>

#include "fastrun/launcher/binding/binding_plan.h"

namespace fastrun::launcher {

struct ChildBinding {
  std::vector<unsigned long> cpu_mask;   // bit c: CPU c; empty: affinity left as inherited
  std::vector<unsigned long> node_mask;  // bit n: NUMA node n; empty: default memory policy
};

ChildBinding child_binding(const RankBinding& binding);

// Async-signal-safe (sched_setaffinity, then set_mempolicy(MPOL_PREFERRED), both raw system
// calls). Returns 0, or the errno of the call that failed, whose name goes to *failed.
int apply_child_binding(const ChildBinding& binding, const char** failed);

// The same for the calling thread, before it starts others (launch_self's rank 0): throws Error
// naming the call and errno.
void bind_calling_thread(const RankBinding& binding);

}  // namespace fastrun::launcher

#pragma once
// Joining a job: the one call that turns the environment into a Context (context.h).
//   auto ctx = fastrun::join();                     // reads the environment (env_sources.h)
//   auto ctx = fastrun::join({.backend = "gloo"});  // or name the backend, the timeout
// join() steps (join.cpp): 1. layout from the environment (logged once with its source); 2. the
// store (connect, or host it as torchrun's rank 0, or an in-process one for a world of one);
// 3. exchange host, pid and device identity, refusing two ranks on one GPU, under
// FASTRUN_TIMEOUT with the missing ranks named; 4. the world group on the chosen backend.
#include <memory>
#include <string>

#include "fastrun/runtime/duration.h"
#include "fastrun/runtime/join/context.h"

namespace fastrun {

struct JoinOptions {
  std::string backend = "";  // "" = FASTRUN_BACKEND (auto|shm|gloo|hier|nccl)
  Duration timeout{};        // zero = FASTRUN_TIMEOUT; any unit: std::chrono::seconds(30), 500ms
};

std::shared_ptr<Context> join(const JoinOptions& options = {});

// The context of the last join() in this process that is still alive (nullptr if none): what
// the fastNLP driver surface (fastnlp_compat/driver.h) acts on.
std::shared_ptr<Context> current_context();

}  // namespace fastrun

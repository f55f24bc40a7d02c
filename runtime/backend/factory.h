#pragma once
// What a backend is to the registry: one function that makes a group's Backend. Apart from
// the registry (registry/registry.h), which names the built-in backends and so sits above them,
// so that a backend (gloo's module, nccl's component) can name the type without depending on it.
#include <memory>

#include "fastrun/runtime/process_group/backend.h"

namespace fastrun::backend {

using Factory = std::unique_ptr<Backend> (*)(const GroupSpec& spec);

}  // namespace fastrun::backend

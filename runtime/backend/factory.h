#pragma once
// What a backend is to the registry: one function that makes a group's ProcessGroup. Apart from
// the registry (registry/registry.h), which names the built-in backends and so sits above them,
// so that a backend (gloo's module, nccl's component) can name the type without depending on it.
#include <memory>

#include "fastrun/runtime/process_group/process_group.h"

namespace fastrun::backend {

using Factory = std::unique_ptr<ProcessGroup> (*)(const GroupSpec& spec);

}  // namespace fastrun::backend

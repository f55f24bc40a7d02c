#pragma once
// Backends register themselves by name (one static Registration in each backend's folder), so
// the process-group layer never links a backend by symbol and a backend that is not built
// (nccl without CUDA) is simply absent.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/process_group/process_group.h"

namespace fastrun::backend {

using Factory = std::unique_ptr<ProcessGroup> (*)(const GroupSpec& spec);

struct Registration {
  Registration(std::string name, Factory factory);
};

// The factory registered under `name`; ConfigError listing the built backends if none.
Factory find(std::string_view name);
bool available(std::string_view name);
std::vector<std::string> names();

}  // namespace fastrun::backend

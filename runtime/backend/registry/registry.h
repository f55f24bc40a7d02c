#pragma once
// Backends by name. gloo and shm are entered by the registry itself; an optional component
// registers its own (the CUDA/NCCL component fastrun::nccl: nccl), so a backend that is not in
// the program is simply absent and the process-group layer never names one by symbol.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/backend/factory.h"

namespace fastrun::backend {

struct Registration {
  Registration(std::string name, Factory factory);
};

// The factory registered under `name`; ConfigError listing the built backends if none.
Factory find(std::string_view name);
bool available(std::string_view name);
std::vector<std::string> names();

}  // namespace fastrun::backend

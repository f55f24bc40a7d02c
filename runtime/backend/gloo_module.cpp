#include "fastrun/runtime/backend/gloo_module.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"

namespace fastrun::backend {
namespace {

// Beside this library: the same directory in the build tree and in an installed prefix, moved
// or not. Empty when the runtime is linked into the program itself.
std::string runtime_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&runtime_directory), &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

}  // namespace

Factory load_gloo_module() {
  static std::mutex mutex;
  static Factory factory = nullptr;
  std::lock_guard lock(mutex);
  if (factory != nullptr) return factory;
  const std::string dir = runtime_directory();
  const std::string path = dir.empty() ? std::string(FASTRUN_GLOO_MODULE) : dir + "/" + FASTRUN_GLOO_MODULE;
  // Never closed: groups made from it may live until exit. RTLD_LOCAL: gloo's symbols stay
  // private to the module; the module takes the runtime's from the process.
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) {
    const char* why = dlerror();
    throw ConfigError(fmt::format("backend 'gloo': cannot load its module {}: {} (it is installed beside "
                                  "libfastrun_runtime; reinstall fastrun, or choose FASTRUN_BACKEND=shm on one node)",
                                  path, why != nullptr ? why : "unknown error"));
  }
  auto* entry = reinterpret_cast<Factory (*)()>(dlsym(module, "fastrun_gloo_backend"));
  if (entry == nullptr) {
    throw ConfigError(fmt::format("backend 'gloo': {} has no fastrun_gloo_backend entry point (a module of "
                                  "another fastrun version?)", path));
  }
  factory = entry();
  return factory;
}

}  // namespace fastrun::backend

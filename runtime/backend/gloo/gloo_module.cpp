#include "fastrun/runtime/backend/gloo/gloo_module.h"

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

// The file of another gloo already in the process, or "". PyPI's LibTorch builds its own gloo
// into libtorch_cpu.so and exports it under the same names as Debian's libgloo (which the module
// links); looked up the default way, the module's gloo calls would bind to that one, another
// version with another layout, and crash (seen with torch 2.15: a call through null in
// gloo::Context::createUnboundBuffer). Probed by a symbol both export.
std::string other_gloo() {
  void* symbol = dlsym(RTLD_DEFAULT, "_ZN4gloo10rendezvous7ContextC1Eiii");  // gloo::rendezvous::Context(int, int, int)
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  return info.dli_fname;
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
  int mode = RTLD_NOW | RTLD_LOCAL;
  if (const std::string other = other_gloo(); !other.empty()) {
    // RTLD_DEEPBIND: the module, and the libgloo it loads, look in themselves before the
    // process, so each gloo keeps to its own code. Only when needed: it also puts the module's
    // C and C++ libraries ahead of an allocator the program may interpose, and the sanitizer
    // runtimes refuse it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    throw ConfigError(fmt::format("backend 'gloo': another gloo is loaded in this process ({}, e.g. PyPI's LibTorch); "
                                  "fastrun's gloo module would need RTLD_DEEPBIND to keep to its own, which the "
                                  "sanitizer runtime refuses: use FASTRUN_BACKEND=shm on one node, or a build "
                                  "without sanitizers", other));
#else
    mode |= RTLD_DEEPBIND;
#endif
  }
  void* module = dlopen(path.c_str(), mode);
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

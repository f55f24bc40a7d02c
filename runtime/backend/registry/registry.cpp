#include "fastrun/runtime/backend/registry/registry.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/backend/hier/hier_backend.h"
#include "fastrun/runtime/backend/shm/shm_backend.h"
#include "fastrun/runtime/error.h"
#ifdef FASTRUN_GLOO_MODULE
#include "fastrun/runtime/backend/gloo/gloo_module.h"
#else
#include "fastrun/runtime/backend/gloo/gloo_backend.h"
#endif

namespace fastrun::backend {
namespace {

std::unique_ptr<Backend> make_hier(const GroupSpec& spec);  // below: it looks gloo up here

struct Table {
  // The built-in backends are entered here, by symbol, not by a static object in their own
  // file: a program linking the static libfastrun_runtime.a would leave such files out.
  // gloo, in shared builds, is a module loaded on first use (gloo_module.h).
  Table() : factories{{"shm", &shm::make_shm_backend}, {"hier", &make_hier}} {
#ifndef FASTRUN_GLOO_MODULE
    factories.emplace("gloo", &gloo_backend::make_gloo_backend);
#endif
  }
  std::mutex mutex;
  std::map<std::string, Factory, std::less<>> factories;
};

Table& table() {
  static Table t;  // function-local: safe against static-initialisation order
  return t;
}

// Enters gloo once its module is loaded (a ConfigError from the loader propagates).
void ensure_gloo() {
#ifdef FASTRUN_GLOO_MODULE
  auto& t = table();
  {
    std::lock_guard lock(t.mutex);
    if (t.factories.count("gloo") != 0) return;
  }
  const Factory gloo = load_gloo_module();
  std::lock_guard lock(t.mutex);
  t.factories.emplace("gloo", gloo);
#endif
}

// hier is made of gloo groups (and shm): it gets gloo's factory from here, once loaded.
std::unique_ptr<Backend> make_hier(const GroupSpec& spec) { return hier::make_hier_backend(spec, find("gloo")); }

}  // namespace

Registration::Registration(std::string name, Factory factory) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  t.factories[std::move(name)] = factory;
}

std::vector<std::string> names() {
  try {
    ensure_gloo();
  } catch (const Error&) {  // a missing module: gloo is then not available, which is the answer
  }
  auto& t = table();
  std::lock_guard lock(t.mutex);
  std::vector<std::string> out;
  for (auto& [name, f] : t.factories) out.push_back(name);
  return out;
}

bool available(std::string_view name) {
  if (name == "gloo" || name == "hier") {  // hier is made of gloo groups (and shm)
    try {
      ensure_gloo();
    } catch (const Error&) {
      return false;
    }
  }
  auto& t = table();
  std::lock_guard lock(t.mutex);
  return t.factories.find(name) != t.factories.end();
}

Factory find(std::string_view name) {
  if (name == "gloo" || name == "hier") ensure_gloo();
  {
    auto& t = table();
    std::lock_guard lock(t.mutex);
    auto it = t.factories.find(name);
    if (it != t.factories.end()) return it->second;
  }
  // nccl lives in its own library so that CPU programs load no CUDA: say what to link.
  const char* how = name == "nccl" ? "; nccl comes with the CUDA/NCCL component: link fastrun::nccl (CMake) or "
                                     "`pkg-config --libs fastrun-nccl`, built where CUDA and NCCL are found"
                                   : "";
  throw ConfigError(fmt::format("backend '{}' is not available in this program: available backends are [{}] "
                                "(select one with FASTRUN_BACKEND or the group options){}",
                                name, fmt::join(names(), ", "), how));
}

}  // namespace fastrun::backend

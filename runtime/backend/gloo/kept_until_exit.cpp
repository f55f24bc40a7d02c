#include "fastrun/runtime/backend/gloo/kept_until_exit.h"

#include <mutex>
#include <vector>

namespace fastrun::gloo_backend {

void keep_until_exit(std::shared_ptr<const void> object) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::shared_ptr<const void>>;  // reachable, never freed
  std::lock_guard lock(mutex);
  kept->push_back(std::move(object));
}

}  // namespace fastrun::gloo_backend

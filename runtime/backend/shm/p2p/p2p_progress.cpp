#include "fastrun/runtime/backend/shm/p2p/p2p_progress.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "fastrun/runtime/backend/shm/p2p/p2p_engine.h"

namespace fastrun::shm {
namespace {

struct Engines {
  std::mutex mutex;
  std::vector<std::weak_ptr<P2PEngine>> all;
};

Engines& engines() {
  static Engines* e = new Engines;  // never destroyed: a group may go away during exit
  return *e;
}

}  // namespace

void register_for_progress(const std::shared_ptr<P2PEngine>& engine) {
  Engines& e = engines();
  std::lock_guard lock(e.mutex);
  std::erase_if(e.all, [](const auto& w) { return w.expired(); });
  e.all.push_back(engine);
}

void progress_all_p2p() noexcept {
  std::vector<std::shared_ptr<P2PEngine>> live;
  {
    Engines& e = engines();
    std::lock_guard lock(e.mutex);
    for (const auto& w : e.all)
      if (auto engine = w.lock()) live.push_back(std::move(engine));
  }
  // Outside the registry's lock: each engine takes its own.
  for (const auto& engine : live) engine->poll();
}

}  // namespace fastrun::shm

// The model's process state and its stream workers (model_state.h).
#include "cudart/model_state.h"

#include <pthread.h>

#include <cstdlib>
#include <string>
#include <thread>

namespace fastrun_model {
namespace {

std::atomic<bool> g_initialised{false};
std::atomic<bool> g_forked{false};
std::atomic<bool> g_unloading{false};

void after_fork_in_child() {
  if (g_initialised.load()) g_forked.store(true);
}

__attribute__((destructor)) void on_unload() { g_unloading.store(true); }

// FASTRUN_CUDA_MODEL_DEVICES (default 1) model devices, filtered by CUDA_VISIBLE_DEVICES as CUDA
// does: a comma-separated list of ordinals, read up to the first entry that is not a valid and
// new ordinal (CUDA stops there too); UUID entries are not modelled and end the list.
std::vector<int> visible_devices() {
  int count = 1;
  if (const char* n = std::getenv("FASTRUN_CUDA_MODEL_DEVICES"); n != nullptr && *n != '\0') count = std::atoi(n);
  std::vector<int> out;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) {
    for (int i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  const std::string list(visible);
  std::size_t pos = 0;
  while (pos < list.size()) {
    const std::size_t comma = list.find(',', pos);
    const std::string entry = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (entry.empty() || entry.find_first_not_of("0123456789") != std::string::npos) break;
    const int ordinal = std::atoi(entry.c_str());
    if (ordinal >= count) break;
    bool seen = false;
    for (int d : out) seen = seen || d == ordinal;
    if (seen) break;
    out.push_back(ordinal);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

void worker(std::shared_ptr<Stream> s) {
  State& st = state();
  std::unique_lock lock(st.mutex);
  for (;;) {
    st.progress.wait(lock, [&] {
      if (s->queue.empty()) return s->closing;
      for (const auto& [other, n] : s->queue.front().waits) {
        if (other->completed < n) return false;
      }
      return true;
    });
    if (s->queue.empty()) break;
    Task task = std::move(s->queue.front());
    s->queue.pop_front();
    if (task.run) {
      lock.unlock();
      task.run();
      lock.lock();
    }
    ++s->completed;
    st.progress.notify_all();
  }
  st.live.erase(s);
}

}  // namespace

State& state() {
  static State* s = [] {
    auto* created = new State;  // never deleted (see the header)
    created->physical = visible_devices();
    created->legacy.resize(created->physical.size());
    pthread_atfork(nullptr, nullptr, &after_fork_in_child);
    g_initialised.store(true);
    return created;
  }();
  return *s;
}

cudaError_t usable() {
  if (g_forked.load()) return cudaErrorInitializationError;
  if (g_unloading.load()) return cudaErrorCudartUnloading;
  return cudaSuccess;
}

std::shared_ptr<Stream> make_stream_locked(int device, bool blocking, bool legacy) {
  auto s = std::make_shared<Stream>();
  s->device = device;
  s->blocking = blocking;
  s->legacy = legacy;
  state().live.insert(s);
  std::thread(worker, s).detach();  // it ends once the stream is destroyed and drained
  return s;
}

std::uint64_t enqueue_locked(const std::shared_ptr<Stream>& s, std::function<void()> run,
                             std::vector<std::pair<std::shared_ptr<Stream>, std::uint64_t>> waits) {
  State& st = state();
  // The legacy default stream and blocking streams wait for each other's earlier work.
  if (s->legacy) {
    for (const auto& other : st.live) {
      if (other->blocking && other->device == s->device && other->completed < other->enqueued)
        waits.emplace_back(other, other->enqueued);
    }
  } else if (s->blocking) {
    const auto& legacy = st.legacy[static_cast<std::size_t>(s->device)];
    if (legacy && legacy->completed < legacy->enqueued) waits.emplace_back(legacy, legacy->enqueued);
  }
  s->queue.push_back(Task{std::move(run), std::move(waits)});
  st.progress.notify_all();
  return ++s->enqueued;
}

void wait_for(std::unique_lock<std::mutex>& lock, const std::shared_ptr<Stream>& s, std::uint64_t n) {
  state().progress.wait(lock, [&] { return s->completed >= n; });
}

std::shared_ptr<Stream> resolve_locked(cudaStream_t handle) {
  State& st = state();
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
    const int device = current_device();
    if (device < 0 || device >= static_cast<int>(st.physical.size())) return nullptr;
    auto& legacy = st.legacy[static_cast<std::size_t>(device)];
    if (!legacy) legacy = make_stream_locked(device, true, true);
    return legacy;
  }
  if (!st.streams.count(handle)) return nullptr;
  return handle->stream;
}

int& current_device() {
  thread_local int device = 0;
  return device;
}

cudaError_t& last_error() {
  thread_local cudaError_t last = cudaSuccess;
  return last;
}

cudaError_t record_error(cudaError_t e) {
  if (e != cudaSuccess) last_error() = e;
  return e;
}

}  // namespace fastrun_model

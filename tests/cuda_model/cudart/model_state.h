#pragma once
// The CUDA runtime model's state: devices, allocations, streams. One process-wide instance
// (state()), guarded by one mutex; one condition variable announces every completed task, so a
// waiter (a worker before a cross-stream wait, a host thread in a synchronize) re-checks.
//
// Streams: an ordered queue of tasks run by the stream's own worker thread. A task may carry
// waits, (stream, n) pairs meaning "stream has completed n tasks": cudaStreamWaitEvent and the
// legacy default stream's implicit synchronisation are such waits. An event is a (stream, n)
// pair taken when it is recorded; it is complete when that stream has completed n tasks.
#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace fastrun_model {

struct Stream;

struct Task {
  std::function<void()> run;  // empty: a marker (event record, wait)
  std::vector<std::pair<std::shared_ptr<Stream>, std::uint64_t>> waits;
};

struct Stream {
  int device = 0;
  bool legacy = false;    // the device's legacy default stream (stream 0)
  bool blocking = false;  // created without cudaStreamNonBlocking: synchronises with the legacy stream
  std::deque<Task> queue;
  std::uint64_t enqueued = 0;   // tasks ever enqueued
  std::uint64_t completed = 0;  // tasks ever completed (in order)
  bool closing = false;         // destroyed: the worker ends once the queue is empty
};

struct Allocation {
  char* device_address = nullptr;  // PROT_NONE: what cudaMalloc handed out
  char* alias = nullptr;           // read-write view of the same pages, for the model's own copies
  std::size_t bytes = 0;
  std::size_t mapped = 0;
  int device = 0;
};

struct State {
  std::mutex mutex;
  std::condition_variable progress;  // notified whenever a task completes or is enqueued
  std::vector<int> physical;          // visible ordinal -> physical model device
  std::map<std::uintptr_t, Allocation> allocations;  // by device address
  std::vector<std::shared_ptr<Stream>> legacy;       // per visible device, made lazily
  std::set<std::shared_ptr<Stream>> live;            // every stream whose worker runs
  std::set<const void*> streams, events;             // live handles
};

// The process's state, made on first use (reads FASTRUN_CUDA_MODEL_DEVICES and
// CUDA_VISIBLE_DEVICES once, as CUDA reads the latter once). Never destroyed: worker threads
// may outlive static destruction.
State& state();

// cudaSuccess, or the error every call returns now: cudaErrorInitializationError in a child
// forked after the parent initialised the model (CUDA is not fork-safe), cudaErrorCudartUnloading
// once the library is being unloaded.
cudaError_t usable();

// Enqueues a task on `s` (with the legacy stream's implicit waits); returns its number: the
// task is done when s->completed >= that number. Caller holds state().mutex.
std::uint64_t enqueue_locked(const std::shared_ptr<Stream>& s, std::function<void()> run,
                             std::vector<std::pair<std::shared_ptr<Stream>, std::uint64_t>> waits = {});

// Blocks (releasing the lock) until s has completed `n` tasks.
void wait_for(std::unique_lock<std::mutex>& lock, const std::shared_ptr<Stream>& s, std::uint64_t n);

// The stream behind a handle: 0, cudaStreamLegacy and cudaStreamPerThread are the current
// device's legacy stream; nullptr for an unknown handle. Caller holds state().mutex.
std::shared_ptr<Stream> resolve_locked(cudaStream_t handle);

// A new stream with its worker thread. Caller holds state().mutex.
std::shared_ptr<Stream> make_stream_locked(int device, bool blocking, bool legacy);

// The calling thread's current device (cudaSetDevice), and its last error (cudaGetLastError).
int& current_device();
cudaError_t record_error(cudaError_t e);  // sets last_error() unless e is cudaSuccess
cudaError_t& last_error();

}  // namespace fastrun_model

// The opaque handle types of the CUDA headers, defined by the model.
struct CUstream_st {
  std::shared_ptr<fastrun_model::Stream> stream;
};
struct CUevent_st {
  int device = 0;
  std::shared_ptr<fastrun_model::Stream> stream;  // null until recorded
  std::uint64_t target = 0;
};

// The CUDA runtime model: streams, events, copies and host functions (the CUDA API, extern "C").
// Ordering is real: every copy, memset, host function and NCCL operation is a task run by its
// stream's worker thread, so host code that reads a result before synchronising sees old data.
// Synchronous behaviour follows the CUDA "API synchronization behavior" page for pageable host
// memory: cudaMemcpy host-to-device returns once the source is staged (the device write is still
// queued), device-to-host returns once the copy is done, device-to-device and cudaMemset are
// asynchronous; all on the legacy default stream.
#include <cstring>
#include <memory>
#include <vector>

#include "cuda_model.h"
#include "cudart/model_state.h"

using namespace fastrun_model;

namespace {

cudaError_t check_current() {
  if (const cudaError_t e = usable(); e != cudaSuccess) return e;
  if (state().physical.empty()) return cudaErrorNoDevice;
  return cudaSuccess;
}

// The model's alias of [p, p + bytes) when it is device memory, else nullptr.
char* alias_of(const void* p, std::size_t bytes) {
  return static_cast<char*>(fastrun_cuda_model_alias(p, bytes, nullptr));
}

cudaError_t copy_on(cudaStream_t handle, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                    bool synchronous) {
  if (const cudaError_t e = check_current(); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  char* dst_alias = alias_of(dst, bytes);
  const char* src_alias = alias_of(src, bytes);
  if (kind == cudaMemcpyDefault) {
    kind = dst_alias ? (src_alias ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                     : (src_alias ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyHostToHost && kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost &&
      kind != cudaMemcpyDeviceToDevice) {
    return cudaErrorInvalidMemcpyDirection;
  }
  // A pointer on the wrong side of the copy: with unified addressing CUDA would still copy, but
  // a device range that is not inside one allocation is an invalid argument.
  if ((dst_device && !dst_alias) || (src_device && !src_alias) || (!dst_device && dst_alias) ||
      (!src_device && src_alias)) {
    return cudaErrorInvalidValue;
  }
  if (kind == cudaMemcpyHostToHost) {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  State& st = state();
  std::unique_lock lock(st.mutex);
  const auto stream = resolve_locked(handle);
  if (!stream) return cudaErrorInvalidResourceHandle;
  std::uint64_t done = 0;
  if (kind == cudaMemcpyHostToDevice) {
    // Staged: the host buffer may be reused as soon as the call returns.
    if (synchronous) wait_for(lock, stream, stream->enqueued);
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    done = enqueue_locked(stream, [dst_alias, staged] { std::memcpy(dst_alias, staged->data(), staged->size()); });
  } else if (kind == cudaMemcpyDeviceToHost) {
    char* host = static_cast<char*>(dst);
    done = enqueue_locked(stream, [host, src_alias, bytes] { std::memcpy(host, src_alias, bytes); });
    if (synchronous) wait_for(lock, stream, done);
  } else {
    done = enqueue_locked(stream, [dst_alias, src_alias, bytes] { std::memmove(dst_alias, src_alias, bytes); });
  }
  return cudaSuccess;
}

cudaError_t memset_on(cudaStream_t handle, void* dst, int value, size_t bytes) {
  if (const cudaError_t e = check_current(); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  char* alias = alias_of(dst, bytes);
  if (alias == nullptr) return cudaErrorInvalidValue;
  std::lock_guard lock(state().mutex);
  const auto stream = resolve_locked(handle);
  if (!stream) return cudaErrorInvalidResourceHandle;
  enqueue_locked(stream, [alias, value, bytes] { std::memset(alias, value, bytes); });
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t fastrun_cuda_model_enqueue(cudaStream_t handle, void (*fn)(void*), void* arg) {
  if (const cudaError_t e = check_current(); e != cudaSuccess) return e;
  std::lock_guard lock(state().mutex);
  const auto stream = resolve_locked(handle);
  if (!stream) return cudaErrorInvalidResourceHandle;
  enqueue_locked(stream, [fn, arg] { fn(arg); });
  return cudaSuccess;
}

int fastrun_cuda_model_stream_device(cudaStream_t handle) {
  if (check_current() != cudaSuccess) return -1;
  std::lock_guard lock(state().mutex);
  const auto stream = resolve_locked(handle);
  return stream ? stream->device : -1;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return record_error(copy_on(nullptr, dst, src, bytes, kind, true));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return record_error(copy_on(stream, dst, src, bytes, kind, false));
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) { return record_error(memset_on(nullptr, dst, value, bytes)); }

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  return record_error(memset_on(stream, dst, value, bytes));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* handle, unsigned int flags) {
  if (handle == nullptr || (flags & ~static_cast<unsigned>(cudaStreamNonBlocking)) != 0)
    return record_error(cudaErrorInvalidValue);
  if (const cudaError_t e = check_current(); e != cudaSuccess) return record_error(e);
  std::lock_guard lock(state().mutex);
  auto* h = new CUstream_st{make_stream_locked(current_device(), (flags & cudaStreamNonBlocking) == 0, false)};
  state().streams.insert(h);
  *handle = h;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* handle) { return cudaStreamCreateWithFlags(handle, cudaStreamDefault); }

// Returns at once; work already queued still runs, then the worker ends (as in CUDA).
cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  if (const cudaError_t e = usable(); e != cudaSuccess) return record_error(e);
  State& st = state();
  std::lock_guard lock(st.mutex);
  if (handle == nullptr || !st.streams.erase(handle)) return record_error(cudaErrorInvalidResourceHandle);
  handle->stream->closing = true;
  st.progress.notify_all();
  delete handle;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
  if (const cudaError_t e = check_current(); e != cudaSuccess) return record_error(e);
  std::unique_lock lock(state().mutex);
  const auto stream = resolve_locked(handle);
  if (!stream) return record_error(cudaErrorInvalidResourceHandle);
  wait_for(lock, stream, stream->enqueued);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t handle) {
  if (const cudaError_t e = check_current(); e != cudaSuccess) return record_error(e);
  std::lock_guard lock(state().mutex);
  const auto stream = resolve_locked(handle);
  if (!stream) return record_error(cudaErrorInvalidResourceHandle);
  return stream->completed >= stream->enqueued ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t handle, cudaEvent_t event, unsigned int flags) {
  if (const cudaError_t e = check_current(); e != cudaSuccess) return record_error(e);
  if (flags != 0) return record_error(cudaErrorInvalidValue);
  std::lock_guard lock(state().mutex);
  const auto stream = resolve_locked(handle);
  if (!stream || !state().events.count(event)) return record_error(cudaErrorInvalidResourceHandle);
  // Waits for the event's most recent record at the time of this call; none: nothing to wait for.
  if (event->stream) enqueue_locked(stream, {}, {{event->stream, event->target}});
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t handle, cudaHostFn_t fn, void* user_data) {
  if (fn == nullptr) return record_error(cudaErrorInvalidValue);
  return record_error(fastrun_cuda_model_enqueue(handle, fn, user_data));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  constexpr unsigned kKnown = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (event == nullptr || (flags & ~kKnown) != 0) return record_error(cudaErrorInvalidValue);
  if (const cudaError_t e = check_current(); e != cudaSuccess) return record_error(e);
  std::lock_guard lock(state().mutex);
  auto* h = new CUevent_st;
  h->device = current_device();
  state().events.insert(h);
  *event = h;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (const cudaError_t e = usable(); e != cudaSuccess) return record_error(e);
  std::lock_guard lock(state().mutex);
  if (event == nullptr || !state().events.erase(event)) return record_error(cudaErrorInvalidResourceHandle);
  delete event;  // a pending record needs nothing from it: waits hold the stream, not the event
  return cudaSuccess;
}

// A record is a marker task: it completes when everything before it on the stream has (and,
// on the legacy stream, what it implicitly waits for).
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t handle) {
  if (const cudaError_t e = check_current(); e != cudaSuccess) return record_error(e);
  std::lock_guard lock(state().mutex);
  const auto stream = resolve_locked(handle);
  if (!stream || !state().events.count(event)) return record_error(cudaErrorInvalidResourceHandle);
  if (stream->device != event->device) return record_error(cudaErrorInvalidResourceHandle);
  event->target = enqueue_locked(stream, {});
  event->stream = stream;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (const cudaError_t e = usable(); e != cudaSuccess) return record_error(e);
  std::lock_guard lock(state().mutex);
  if (!state().events.count(event)) return record_error(cudaErrorInvalidResourceHandle);
  if (!event->stream || event->stream->completed >= event->target) return cudaSuccess;
  return cudaErrorNotReady;  // not an error: the last error stays as it was
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (const cudaError_t e = usable(); e != cudaSuccess) return record_error(e);
  std::unique_lock lock(state().mutex);
  if (!state().events.count(event)) return record_error(cudaErrorInvalidResourceHandle);
  if (event->stream) wait_for(lock, event->stream, event->target);
  return cudaSuccess;
}

}  // extern "C"

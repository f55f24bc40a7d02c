// The CUDA runtime model: devices, errors and device memory (the CUDA API, extern "C").
//
// Device memory is host memory the host cannot touch: cudaMalloc maps a memfd twice, PROT_NONE
// at the address it hands out (so a host dereference of a device pointer faults, as on a GPU)
// and read-write at a private alias that only the model's own device work uses.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "cuda_model.h"
#include "cudart/model_state.h"

using namespace fastrun_model;

namespace {

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};

// The codes the model returns, with the real runtime's names and strings.
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
};

const ErrorText* find_error(cudaError_t e) {
  for (const auto& t : kErrors) {
    if (t.code == e) return &t;
  }
  return nullptr;
}

int visible_count() { return static_cast<int>(state().physical.size()); }

// cudaSuccess when the calling thread's current device exists.
cudaError_t check_current() {
  if (const cudaError_t e = usable(); e != cudaSuccess) return e;
  if (visible_count() == 0) return cudaErrorNoDevice;
  if (current_device() >= visible_count()) return cudaErrorInvalidDevice;
  return cudaSuccess;
}

// The allocation holding [p, p + bytes), or nullptr. Caller holds the mutex.
Allocation* find_locked(const void* p, std::size_t bytes) {
  auto& allocations = state().allocations;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  auto it = allocations.upper_bound(address);
  if (it == allocations.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  if (address + bytes > it->first + a.bytes || (bytes == 0 && address >= it->first + a.mapped)) return nullptr;
  return &a;
}

}  // namespace

extern "C" {

int fastrun_cuda_model_devices(void) { return visible_count(); }

void* fastrun_cuda_model_alias(const void* ptr, std::size_t bytes, int* device) {
  std::lock_guard lock(state().mutex);
  Allocation* a = find_locked(ptr, bytes);
  if (a == nullptr) return nullptr;
  if (device != nullptr) *device = a->device;
  return a->alias + (static_cast<const char*>(ptr) - a->device_address);
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return record_error(cudaErrorInvalidValue);
  if (const cudaError_t e = usable(); e != cudaSuccess) return record_error(e);
  *count = visible_count();
  return *count == 0 ? record_error(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (const cudaError_t e = usable(); e != cudaSuccess) return record_error(e);
  if (visible_count() == 0) return record_error(cudaErrorNoDevice);
  if (device < 0 || device >= visible_count()) return record_error(cudaErrorInvalidDevice);
  current_device() = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return record_error(cudaErrorInvalidValue);
  if (const cudaError_t e = check_current(); e != cudaSuccess) return record_error(e);
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  if (const cudaError_t e = usable(); e != cudaSuccess) return record_error(e);
  if (device < 0 || device >= visible_count()) return record_error(cudaErrorInvalidDevice);
  if (bus_id == nullptr || len < 13) return record_error(cudaErrorInvalidValue);
  // One bus per physical model device, so two processes given the same device see one id.
  std::snprintf(bus_id, static_cast<std::size_t>(len), "0000:%02X:00.0",
                0x10 + state().physical[static_cast<std::size_t>(device)]);
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = last_error();
  last_error() = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error(); }

const char* cudaGetErrorName(cudaError_t error) {
  const ErrorText* t = find_error(error);
  return t ? t->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  const ErrorText* t = find_error(error);
  return t ? t->text : "unrecognized error code";
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return record_error(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return record_error(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (ptr == nullptr) return record_error(cudaErrorInvalidValue);
  if (const cudaError_t e = check_current(); e != cudaSuccess) return record_error(e);
  if (bytes == 0) {
    *ptr = nullptr;
    return cudaSuccess;
  }
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t mapped = (bytes + page - 1) / page * page;
  const int fd = ::memfd_create("fastrun-cuda-model", MFD_CLOEXEC);
  if (fd < 0) return record_error(cudaErrorMemoryAllocation);
  void* device_address = MAP_FAILED;
  void* alias = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(mapped)) == 0) {
    device_address = ::mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, 0);
    alias = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  ::close(fd);  // the mappings keep the memory
  if (device_address == MAP_FAILED || alias == MAP_FAILED) {
    if (device_address != MAP_FAILED) ::munmap(device_address, mapped);
    if (alias != MAP_FAILED) ::munmap(alias, mapped);
    return record_error(cudaErrorMemoryAllocation);
  }
  Allocation a;
  a.device_address = static_cast<char*>(device_address);
  a.alias = static_cast<char*>(alias);
  a.bytes = bytes;
  a.mapped = mapped;
  a.device = current_device();
  {
    std::lock_guard lock(state().mutex);
    state().allocations[reinterpret_cast<std::uintptr_t>(device_address)] = a;
  }
  *ptr = device_address;
  return cudaSuccess;
}

// cudaFree synchronises the device first (as the real one does), so no queued work still uses
// the memory when it is unmapped.
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return usable() == cudaSuccess ? cudaSuccess : record_error(usable());
  if (const cudaError_t e = usable(); e != cudaSuccess) return record_error(e);
  State& st = state();
  std::unique_lock lock(st.mutex);
  auto it = st.allocations.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == st.allocations.end()) return record_error(cudaErrorInvalidValue);
  const int device = it->second.device;
  std::vector<std::pair<std::shared_ptr<Stream>, std::uint64_t>> pending;
  for (const auto& s : st.live) {
    if (s->device == device) pending.emplace_back(s, s->enqueued);
  }
  for (const auto& [s, n] : pending) wait_for(lock, s, n);
  it = st.allocations.find(reinterpret_cast<std::uintptr_t>(ptr));  // the lock was released
  if (it == st.allocations.end()) return record_error(cudaErrorInvalidValue);
  const Allocation a = it->second;
  st.allocations.erase(it);
  lock.unlock();
  ::munmap(a.device_address, a.mapped);
  ::munmap(a.alias, a.mapped);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  if (const cudaError_t e = check_current(); e != cudaSuccess) return record_error(e);
  State& st = state();
  std::unique_lock lock(st.mutex);
  std::vector<std::pair<std::shared_ptr<Stream>, std::uint64_t>> pending;
  for (const auto& s : st.live) {
    if (s->device == current_device()) pending.emplace_back(s, s->enqueued);
  }
  for (const auto& [s, n] : pending) wait_for(lock, s, n);
  return cudaSuccess;
}

}  // extern "C"

// The CPU model of CUDA and NCCL against the semantics it claims (docs/cuda-model.md): stream
// ordering, events, page protection of device memory, device counting, and NCCL across real
// processes: data, a collective whose peer never comes or calls a different one (pending until
// abort), a killed peer
// (ncclRemoteError), non-blocking init.
// CUDA is not fork-safe (the model refuses CUDA in a child forked after the parent used it), so
// the multi-process cases fork before this process touches CUDA; CTest runs each case in its
// own process.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>
#include <dirent.h>
#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_model.h"
#include "test_support/children.h"
#include "test_support/time_limits.h"

using namespace std::chrono_literals;
using fastrun::test::Children;

namespace {

void CUDART_CB sleep_ms(void* arg) { std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<std::intptr_t>(arg))); }

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, bytes) == cudaSuccess);
  return p;
}

// Segments of the NCCL model this process (or its children) left in /dev/shm.
int model_segments() {
  int n = 0;
  if (DIR* d = ::opendir("/dev/shm")) {
    const std::string prefix = "fastrun-nccl-model-" + std::to_string(::getpid()) + "-";
    while (dirent* e = ::readdir(d)) n += std::string(e->d_name).rfind(prefix, 0) == 0;
    ::closedir(d);
  }
  return n;
}

#define CHILD_CHECK(cond) \
  do {                    \
    if (!(cond)) throw std::runtime_error(std::string("failed: ") + #cond + " at line " + std::to_string(__LINE__)); \
  } while (0)

}  // namespace

TEST_CASE("cuda model: copies run in stream order, asynchronously", "[cuda_model]") {
  float* d = static_cast<float*>(device_alloc(4 * sizeof(float)));
  const float ones[4] = {1, 1, 1, 1}, twos[4] = {2, 2, 2, 2};
  REQUIRE(cudaMemcpy(d, ones, sizeof ones, cudaMemcpyHostToDevice) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  // A stalled non-blocking stream: its copy has not happened when the host reads on stream 0.
  REQUIRE(cudaLaunchHostFunc(s, &sleep_ms, reinterpret_cast<void*>(300)) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(d, twos, sizeof twos, cudaMemcpyHostToDevice, s) == cudaSuccess);
  CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
  float got[4] = {};
  REQUIRE(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(got[0] == 1.0f);  // the missing synchronisation shows as old data
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  REQUIRE(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(got[3] == 2.0f);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaFree(d) == cudaSuccess);
}

TEST_CASE("cuda model: events and cudaStreamWaitEvent order two streams", "[cuda_model]") {
  int* d = static_cast<int*>(device_alloc(sizeof(int)));
  cudaStream_t a = nullptr, b = nullptr;
  cudaEvent_t e = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
  CHECK(cudaEventQuery(e) == cudaSuccess);  // never recorded
  const int seven = 7, nine = 9;
  REQUIRE(cudaLaunchHostFunc(a, &sleep_ms, reinterpret_cast<void*>(200)) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(d, &seven, sizeof seven, cudaMemcpyHostToDevice, a) == cudaSuccess);
  REQUIRE(cudaEventRecord(e, a) == cudaSuccess);
  CHECK(cudaEventQuery(e) == cudaErrorNotReady);
  CHECK(cudaGetLastError() == cudaSuccess);  // not-ready is not an error
  REQUIRE(cudaStreamWaitEvent(b, e, 0) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(d, &nine, sizeof nine, cudaMemcpyHostToDevice, b) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(b) == cudaSuccess);
  CHECK(cudaEventQuery(e) == cudaSuccess);
  int got = 0;
  REQUIRE(cudaMemcpy(&got, d, sizeof got, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(got == 9);  // b's copy ran after a's
  CHECK(cudaEventDestroy(e) == cudaSuccess);
  CHECK(cudaEventQuery(e) == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaSuccess);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  cudaFree(d);
}

TEST_CASE("cuda model: the host cannot dereference device memory", "[cuda_model]") {
  int* d = static_cast<int*>(device_alloc(sizeof(int)));
  Children kids;
  kids.spawn([&] { return *static_cast<volatile int*>(d); });  // touches no CUDA: only the inherited mapping
  const auto status = kids.wait_all(fastrun::test::scaled(std::chrono::milliseconds(20000)));
  REQUIRE(status.size() == 1);
  CHECK(status[0].signal == SIGSEGV);
  CHECK(cudaMemcpy(d, d, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);  // src is not host memory
  cudaFree(d);
}

TEST_CASE("cuda model: devices, CUDA_VISIBLE_DEVICES and errors", "[cuda_model]") {
  Children kids;
  auto count_with = [&](const char* model, const char* visible) {
    kids.spawn([=] {
      ::setenv("FASTRUN_CUDA_MODEL_DEVICES", model, 1);
      if (visible) ::setenv("CUDA_VISIBLE_DEVICES", visible, 1);
      else ::unsetenv("CUDA_VISIBLE_DEVICES");
      int n = -1;
      const cudaError_t e = cudaGetDeviceCount(&n);
      return e == cudaSuccess ? n : e == cudaErrorNoDevice && n == 0 ? 100 : 101;
    });
  };
  count_with("4", nullptr);
  count_with("4", "2,3");
  count_with("4", "1,7,2");  // stops at the invalid entry
  count_with("4", "");
  count_with("0", nullptr);
  const auto status = kids.wait_all(fastrun::test::scaled(std::chrono::milliseconds(20000)));
  REQUIRE(status.size() == 5);
  CHECK(status[0].code == 4);
  CHECK(status[1].code == 2);
  CHECK(status[2].code == 1);
  CHECK(status[3].code == 100);
  CHECK(status[4].code == 100);
  // This process (parent) now: a forked child of an initialised process cannot use CUDA.
  int n = 0;
  REQUIRE(cudaGetDeviceCount(&n) == cudaSuccess);
  CHECK(cudaSetDevice(n) == cudaErrorInvalidDevice);
  CHECK(std::string(cudaGetErrorString(cudaErrorInvalidDevice)) == "invalid device ordinal");
  CHECK(std::string(cudaGetErrorName(cudaErrorNoDevice)) == "cudaErrorNoDevice");
  Children late;
  late.spawn([] {
    int k = 0;
    return cudaGetDeviceCount(&k) == cudaErrorInitializationError ? 0 : 1;
  });
  CHECK(late.reap(fastrun::test::scaled(std::chrono::milliseconds(20000))) == 0);
}

namespace {

// Two ranks (forked before this process touches CUDA) run body(rank, id); each returns 0.
template <typename Body>
std::vector<fastrun::test::ChildStatus> two_ranks(Body body, std::chrono::milliseconds limit = 30000ms) {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  Children kids(true);
  for (int r = 0; r < 2; ++r) kids.spawn([&, r] { return body(r, id); });
  return kids.wait_all(fastrun::test::scaled(limit));
}

// Both ranks returned 0, and the communicator's segment went with them.
void check_all_ok(const std::vector<fastrun::test::ChildStatus>& status) {
  for (const auto& s : status) {
    INFO(s.message);
    CHECK(s.ok());
  }
  CHECK(model_segments() == 0);
}

ncclComm_t init(int rank, const ncclUniqueId& id, bool blocking = true) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, rank, &config);
  while (r == ncclInProgress) {
    std::this_thread::sleep_for(1ms);
    ncclCommGetAsyncError(comm, &r);
  }
  CHILD_CHECK(r == ncclSuccess);
  return comm;
}

// A counter in memory that the forked ranks share (a page of its own, unmapped with it).
class SharedCounter {
 public:
  SharedCounter()
      : page_(::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) {
    REQUIRE(page_ != MAP_FAILED);
    new (page_) std::atomic<int>(0);
  }
  ~SharedCounter() { ::munmap(page_, sizeof(std::atomic<int>)); }
  SharedCounter(const SharedCounter&) = delete;
  SharedCounter& operator=(const SharedCounter&) = delete;
  std::atomic<int>& get() const { return *static_cast<std::atomic<int>*>(page_); }

 private:
  void* page_;
};

// Waits (bounded) until `counter` reaches `n`; false if it did not.
bool await_count(const std::atomic<int>& counter, int n) {
  const auto until = std::chrono::steady_clock::now() + fastrun::test::scaled(20000ms);
  while (counter.load() < n && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  return counter.load() >= n;
}

// The collective just enqueued on `s` stays pending (the event recorded after it is not
// reached, and NCCL reports no error), until an abort lets the stream move on. With `checked`,
// every one of `ranks` ranks has checked before any aborts: a rank that aborted and exited first
// is a dead peer to one still checking (ncclRemoteError), which a loaded machine made happen.
void expect_pending_until_abort(ncclComm_t comm, cudaStream_t s, cudaEvent_t e, std::atomic<int>* checked = nullptr,
                                int ranks = 0) {
  CHILD_CHECK(cudaEventRecord(e, s) == cudaSuccess);
  std::this_thread::sleep_for(500ms);
  CHILD_CHECK(cudaEventQuery(e) == cudaErrorNotReady);
  ncclResult_t async = ncclInternalError;
  CHILD_CHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess);
  if (checked) {
    checked->fetch_add(1);
    CHILD_CHECK(await_count(*checked, ranks));
  }
  CHILD_CHECK(ncclCommAbort(comm) == ncclSuccess);
  CHILD_CHECK(cudaEventSynchronize(e) == cudaSuccess);  // the stream moves on after the abort
}

}  // namespace

TEST_CASE("nccl model: all-reduce and broadcast between two processes, no segment left", "[cuda_model][nccl_model]") {
  const auto status = two_ranks([](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = init(rank, id, rank == 0);
    const std::size_t n = 100000;  // several lock steps of the model's slots
    std::vector<float> host(n, static_cast<float>(rank + 1));
    float* d = nullptr;
    CHILD_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), n * sizeof(float)) == cudaSuccess);
    CHILD_CHECK(cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    cudaStream_t s = nullptr;
    CHILD_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    CHILD_CHECK(cudaStreamSynchronize(nullptr) == cudaSuccess);
    CHILD_CHECK(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
    CHILD_CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    CHILD_CHECK(cudaMemcpy(host.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHILD_CHECK(host[0] == 3.0f && host[n - 1] == 3.0f);
    if (rank == 1) std::fill(host.begin(), host.end(), 42.0f);
    CHILD_CHECK(cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    CHILD_CHECK(cudaStreamSynchronize(nullptr) == cudaSuccess);
    CHILD_CHECK(ncclBroadcast(d, d, n, ncclFloat32, 1, comm, s) == ncclSuccess);
    CHILD_CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    CHILD_CHECK(cudaMemcpy(host.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHILD_CHECK(host[0] == 42.0f && host[n - 1] == 42.0f);
    CHILD_CHECK(ncclCommDestroy(comm) == ncclSuccess);
    return 0;
  });
  check_all_ok(status);
}

TEST_CASE("nccl model: non-blocking init is in progress until the peer comes", "[cuda_model][nccl_model]") {
  const auto status = two_ranks([](int rank, const ncclUniqueId& id) {
    if (rank == 1) std::this_thread::sleep_for(300ms);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, rank, &config);
    if (rank == 0) CHILD_CHECK(r == ncclInProgress);
    while (r == ncclInProgress) {
      std::this_thread::sleep_for(1ms);
      CHILD_CHECK(ncclCommGetAsyncError(comm, &r) == ncclSuccess);
    }
    CHILD_CHECK(r == ncclSuccess);
    CHILD_CHECK(ncclCommFinalize(comm) == ncclSuccess);
    CHILD_CHECK(ncclCommDestroy(comm) == ncclSuccess);
    return 0;
  });
  check_all_ok(status);
}

TEST_CASE("nccl model: a collective whose peer never comes stays pending until abort", "[cuda_model][nccl_model]") {
  const SharedCounter checked;
  const auto status = two_ranks([&checked](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = init(rank, id);
    float* d = nullptr;
    CHILD_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), 64) == cudaSuccess);
    if (rank == 1) {
      // Never calls the collective, and stays alive until rank 0 has checked (a fixed 1.5 s
      // could end first on a loaded machine: a dead peer is an error, not a pending op).
      CHILD_CHECK(await_count(checked.get(), 1));
      ncclCommAbort(comm);
      return 0;
    }
    cudaStream_t s = nullptr;
    cudaEvent_t e = nullptr;
    CHILD_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    CHILD_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
    CHILD_CHECK(ncclAllReduce(d, d, 16, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
    expect_pending_until_abort(comm, s, e, &checked.get(), 1);
    return 0;
  });
  check_all_ok(status);
}

// NCCL hangs (or reads garbage) when ranks call different collectives; the model always hangs,
// so fastrun's stalled-op check sees a stall. A matching collective after agreeing ones, and
// one whose elements differ between calls, still completes.
TEST_CASE("nccl model: ranks that call different collectives stay pending until abort", "[cuda_model][nccl_model]") {
  enum Mismatch { kind, count, type, root };
  const Mismatch what = GENERATE(kind, count, type, root);
  CAPTURE(what);
  const SharedCounter checked;
  const auto status = two_ranks([what, &checked](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = init(rank, id);
    double* d = nullptr;
    CHILD_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), 64 * sizeof(double)) == cudaSuccess);
    cudaStream_t s = nullptr;
    cudaEvent_t e = nullptr;
    CHILD_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    CHILD_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
    // Agreeing collectives first (the numbering of both slots is exercised), then the odd one.
    for (int i = 0; i < 3; ++i) CHILD_CHECK(ncclAllReduce(d, d, 8, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
    CHILD_CHECK(ncclAllReduce(d, d, 0, ncclFloat32, ncclSum, comm, s) == ncclSuccess);  // empty: no step
    CHILD_CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    ncclResult_t r = ncclSuccess;
    switch (what) {
      case kind:
        r = rank == 0 ? ncclAllReduce(d, d, 8, ncclFloat32, ncclSum, comm, s)
                      : ncclBroadcast(d, d, 8, ncclFloat32, 0, comm, s);
        break;
      case count: r = ncclAllReduce(d, d, rank == 0 ? 10 : 20, ncclFloat32, ncclSum, comm, s); break;
      case type: r = ncclAllReduce(d, d, 8, rank == 0 ? ncclFloat32 : ncclFloat64, ncclSum, comm, s); break;
      case root: r = ncclBroadcast(d, d, 8, ncclFloat32, rank, comm, s); break;
    }
    CHILD_CHECK(r == ncclSuccess);
    expect_pending_until_abort(comm, s, e, &checked.get(), 2);
    return 0;
  });
  check_all_ok(status);
}

TEST_CASE("nccl model: a killed peer shows as ncclRemoteError, the op stays pending", "[cuda_model][nccl_model]") {
  const auto status = two_ranks([](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = init(rank, id);
    if (rank == 1) ::raise(SIGKILL);
    float* d = nullptr;
    CHILD_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), 64) == cudaSuccess);
    cudaStream_t s = nullptr;
    cudaEvent_t e = nullptr;
    CHILD_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    CHILD_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
    CHILD_CHECK(ncclAllReduce(d, d, 16, ncclFloat32, ncclSum, comm, s) == ncclSuccess);
    CHILD_CHECK(cudaEventRecord(e, s) == cudaSuccess);
    ncclResult_t async = ncclSuccess;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (async == ncclSuccess && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
      ncclCommGetAsyncError(comm, &async);
    }
    CHILD_CHECK(async == ncclRemoteError);
    CHILD_CHECK(std::string(ncclGetLastError(comm)).find("rank 1") != std::string::npos);
    CHILD_CHECK(cudaEventQuery(e) == cudaErrorNotReady);
    CHILD_CHECK(ncclCommAbort(comm) == ncclSuccess);
    CHILD_CHECK(cudaEventSynchronize(e) == cudaSuccess);
    return 0;
  });
  REQUIRE(status.size() == 2);
  INFO(status[0].message);
  CHECK(status[0].ok());
  CHECK(status[1].signal == SIGKILL);
  CHECK(model_segments() == 0);
}

#include "fastrun/runtime/backend/nccl/testing.h"

#include <memory>
#include <thread>

#include "fastrun/runtime/backend/nccl/nccl_backend.h"
#include "fastrun/runtime/cuda/cuda_check.h"
#include "fastrun/runtime/error.h"

namespace fastrun::nccl {
namespace {

void CUDART_CB sleep_on_stream(void* arg) {
  std::unique_ptr<Duration> duration(static_cast<Duration*>(arg));
  std::this_thread::sleep_for(*duration);  // a host function must not call CUDA: it only sleeps
}

}  // namespace

void stall_stream_for_testing(Backend& group, Duration duration) {
  auto* nccl_group = dynamic_cast<NcclBackend*>(&group);
  if (!nccl_group) {
    throw BackendError("stall_stream_for_testing: the group's backend is '" + group.backend_name() + "', not nccl");
  }
  auto arg = std::make_unique<Duration>(duration);
  check_cuda(cudaLaunchHostFunc(nccl_group->stream(), &sleep_on_stream, arg.get()),
             "stall_stream_for_testing: cudaLaunchHostFunc");
  (void)arg.release();  // owned by the host function from here
}

}  // namespace fastrun::nccl

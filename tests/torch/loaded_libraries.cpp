// loaded_libraries: a LibTorch program as a user builds it (fastrun::torch and the LibTorch it
// was configured with), for tests/torch/wheel_libraries_test.cpp. Each rank joins, computes with
// torch, all-reduces over gloo (fastrun's gloo module beside the gloo PyPI's LibTorch carries in
// libtorch_cpu.so), then prints every LibTorch, CUDA, NCCL and gloo library the loader mapped:
//   rank 0 sum 3 library /path/to/libnccl.so.2
// so the test can check that they come from one LibTorch, and NCCL from the wheel.
#include <link.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "fastrun/runtime/join/context.h"

namespace {

std::vector<std::string> libraries() {
  std::vector<std::string> found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const auto slash = path.rfind('/');
        const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
        for (const char* prefix : {"libtorch", "libc10", "libnccl", "libcudart", "libgloo", "libfastrun_gloo"})
          if (name.rfind(prefix, 0) == 0) static_cast<std::vector<std::string>*>(out)->push_back(path);
        return 0;
      },
      &found);
  return found;
}

}  // namespace

int main() {
  try {
    auto ctx = fastrun::join();
    double sum = torch::ones({ctx->world_size()}).sum().item<double>() / ctx->world_size() * (ctx->rank() + 1);
    auto& group = ctx->world().cpu_group();  // gloo: the test sets FASTRUN_BACKEND
    group.all_reduce(fastrun::view_of(&sum, 1))->wait();
    for (const auto& path : libraries()) std::printf("rank %d sum %g library %s\n", ctx->rank(), sum, path.c_str());
    std::fflush(stdout);
    group.barrier()->wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loaded_libraries: %s\n", e.what());
    return 1;
  }
  return 0;
}

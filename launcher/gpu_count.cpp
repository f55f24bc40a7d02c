// Counting GPUs without a CUDA context: creating one would fix CUDA_VISIBLE_DEVICES in this
// process and costs hundreds of milliseconds. NVML is loaded at run time so that fastrun needs no
// GPU library to build or to run CPU jobs.
#include <dirent.h>
#include <dlfcn.h>

#include <cstring>

#include "fastrun/launcher/device_plan.h"

namespace fastrun::launcher {
namespace {

int count_with_nvml() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return -1;
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(lib, "nvmlShutdown"));
  int result = -1;
  if (init && count && shutdown && init() == 0) {  // 0 == NVML_SUCCESS
    unsigned int n = 0;
    if (count(&n) == 0) result = static_cast<int>(n);
    shutdown();
  }
  dlclose(lib);
  return result;
}

int count_with_proc() {
  DIR* dir = opendir("/proc/driver/nvidia/gpus");
  if (!dir) return 0;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
  }
  closedir(dir);
  return n;
}

}  // namespace

int count_physical_gpus() {
  const int n = count_with_nvml();
  return n >= 0 ? n : count_with_proc();
}

}  // namespace fastrun::launcher

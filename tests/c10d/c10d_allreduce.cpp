// A plain c10d program, as a LibTorch user writes one without fastrun: the env:// variables
// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) set up a c10d::TCPStore (rank 0 hosts it on
// MASTER_PORT) and a c10d::ProcessGroupGloo; then one all_reduce of (rank + 1). It prints
// "c10d rank R of W: all_reduce 10 ok" and exits 0 when every element holds W(W+1)/2, else 3.
// The gloo device: GLOO_SOCKET_IFNAME's interface when set, else the host's address (both as
// torch.distributed does it). It knows nothing of fastrun: the tests run it under `fastrun`.
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::string required(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    std::fprintf(stderr, "c10d_allreduce: %s is not set (env:// needs MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)\n",
                 name);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main() {
  const std::string addr = required("MASTER_ADDR");
  const int port = std::stoi(required("MASTER_PORT"));
  const int rank = std::stoi(required("RANK"));
  const int world = std::stoi(required("WORLD_SIZE"));
  const auto timeout = std::chrono::seconds(60);

  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(port);
  so.isServer = rank == 0;
  so.numWorkers = static_cast<std::size_t>(world);
  so.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(addr, so);

  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  options->devices.push_back(ifname != nullptr && *ifname != '\0'
                                 ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                                 : c10d::ProcessGroupGloo::createDefaultDevice());
  c10d::ProcessGroupGloo pg(store, rank, world, options);

  std::vector<at::Tensor> tensors{at::full({4}, static_cast<double>(rank + 1), at::kDouble)};
  pg.allreduce(tensors)->wait();
  const double expected = world * (world + 1) / 2.0;
  const bool ok = tensors[0].eq(expected).all().item<bool>();
  std::printf("c10d rank %d of %d: all_reduce %g %s\n", rank, world, tensors[0][0].item<double>(), ok ? "ok" : "WRONG");
  std::fflush(stdout);
  return ok ? 0 : 3;
}

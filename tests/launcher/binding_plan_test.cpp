// --bind's planning on machines this one is not: a 2-socket, 8-GPU machine from an hwloc
// synthetic topology and a fake sysfs tree (GPUs at PCI addresses on NUMA nodes 0 and 1, an
// NVSwitch bound to the same driver), with --devices subsets and a CUDA_VISIBLE_DEVICES subset.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fastrun/launcher/binding/binding_plan.h"
#include "fastrun/launcher/binding/gpu_locality.h"
#include "fastrun/launcher/binding/topology.h"
#include "fastrun/launcher/device_plan.h"
#include "fastrun/runtime/error.h"
#include "test_support/temp_dir.h"

using namespace fastrun;
using namespace fastrun::launcher;
namespace fs = std::filesystem;
using Cpus = std::vector<int>;

namespace {

// 2 sockets, one NUMA node each, 8 cores of 2 hyperthreads: node 0 has PUs 0-15, node 1 16-31.
constexpr const char* kTwoSockets = "pack:2 numa:1 core:8 pu:2";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// The sysfs of an 8-GPU machine: GPUs 0-3 on node 0 (CPUs 0-15), 4-7 on node 1 (16-31), listed
// by the nvidia driver out of PCI order, with an NVSwitch (a bridge, class 0x068000) among them
// whose address sorts first: if it were taken for a GPU, every ordinal would be off by one.
struct FakeSysfs {
  test::TempDir dir{"fastrun-sysfs"};
  const std::vector<std::string> gpus = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                         "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};
  FakeSysfs() {
    const fs::path driver = dir.path() / "sys/bus/pci/drivers/nvidia";
    fs::create_directories(driver);
    for (const char* f : {"bind", "unbind", "new_id", "uevent"}) write(driver / f, "");
    auto device = [&](const std::string& bdf, const std::string& cls, int node, const std::string& cpus) {
      const fs::path dev = dir.path() / "sys/bus/pci/devices" / bdf;
      write(dev / "class", cls + "\n");
      write(dev / "numa_node", std::to_string(node) + "\n");
      write(dev / "local_cpulist", cpus + "\n");
      fs::create_directory_symlink(dev, driver / bdf);
    };
    for (int i = 7; i >= 0; --i)
      device(gpus[static_cast<std::size_t>(i)], "0x030200", i < 4 ? 0 : 1, i < 4 ? "0-15" : "16-31");
    device("0000:07:00.0", "0x068000", 0, "0-15");
  }
  std::string root() const { return dir.str(); }
};

// The localities of the GPUs `spec` picks (as `fastrun --devices spec`), under `cvd`.
std::vector<GpuLocality> gpus_for(const FakeSysfs& sys, const std::string& spec,
                                  const std::optional<std::string>& cvd = std::nullopt) {
  const DevicePlan plan = plan_devices(spec, cvd, 8);
  std::vector<GpuLocality> out;
  for (const std::string& token : plan.rank_devices) out.push_back(gpu_locality(token, sys.root()));
  return out;
}

MachineLayout two_sockets(const std::optional<Cpus>& allowed = std::nullopt) {
  return load_machine_layout({kTwoSockets, ""}, allowed);
}

Cpus range(int lo, int hi) {
  Cpus v;
  for (int c = lo; c <= hi; ++c) v.push_back(c);
  return v;
}

}  // namespace

TEST_CASE("hwloc's synthetic 2-socket machine becomes two nodes of 8 two-thread cores", "[launcher][binding]") {
  const MachineLayout m = two_sockets();
  REQUIRE(m.nodes.size() == 2);
  CHECK(m.nodes[0].os_index == 0);
  CHECK(m.nodes[1].os_index == 1);
  REQUIRE(m.nodes[1].cores.size() == 8);
  CHECK(m.nodes[0].cores[1] == Cpus{2, 3});
  CHECK(m.nodes[1].cores[0] == Cpus{16, 17});
  // Only the allowed PUs stay; a core with none left goes.
  const MachineLayout some = two_sockets(Cpus{0, 1, 3, 20});
  CHECK(some.nodes[0].cores == std::vector<Cpus>{{0, 1}, {3}});
  CHECK(some.nodes[1].cores == std::vector<Cpus>{{20}});
  CHECK_THROWS_WITH(load_machine_layout({"pack:two", ""}, std::nullopt), Catch::Contains("pack:two"));
}

TEST_CASE("GPU ordinals are PCI bus order of the GPUs, NVSwitches left out", "[launcher][binding]") {
  const FakeSysfs sys;
  CHECK(nvidia_gpu_bus_ids(sys.root()) == sys.gpus);
  const GpuLocality g = gpu_locality("5", sys.root());
  CHECK(g.device == "5");
  CHECK(g.pci_bus_id == "0000:ab:00.0");
  CHECK(g.numa_node == 1);
  CHECK(g.local_cpus == range(16, 31));
}

TEST_CASE("binding plan: --bind core: --devices 2,3 split node 0, --devices 4,6 node 1", "[launcher][binding]") {
  const FakeSysfs sys;
  auto plan = plan_bindings(BindMode::core, two_sockets(), gpus_for(sys, "2,3"), 2);
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].gpu->pci_bus_id == "0000:3a:00.0");
  CHECK(plan[0].cpus == range(0, 7));  // cores 0-3 with their hyperthreads
  CHECK(plan[1].cpus == range(8, 15));
  CHECK(plan[0].memory_node == 0);
  CHECK(plan[1].memory_node == 0);
  plan = plan_bindings(BindMode::core, two_sockets(), gpus_for(sys, "4,6"), 2);
  CHECK(plan[0].gpu->pci_bus_id == "0000:9a:00.0");
  CHECK(plan[1].gpu->pci_bus_id == "0000:ba:00.0");
  CHECK(plan[0].cpus == range(16, 23));
  CHECK(plan[1].cpus == range(24, 31));
  CHECK(plan[1].memory_node == 1);
}

TEST_CASE("binding plan: --bind: the physical GPU of a CUDA_VISIBLE_DEVICES subset, not the local rank", "[launcher][binding]") {
  const FakeSysfs sys;
  // CUDA_VISIBLE_DEVICES=5,7: local rank 0 drives physical GPU 5 (node 1), never GPU 0 (node 0),
  // the mistake of binding by LOCAL_RANK.
  const auto gpus = gpus_for(sys, "all", "5,7");
  REQUIRE(gpus.size() == 2);
  CHECK(gpus[0].device == "5");
  CHECK(gpus[0].pci_bus_id == "0000:ab:00.0");
  CHECK(gpus[1].pci_bus_id == "0000:db:00.0");
  const auto numa = plan_bindings(BindMode::numa, two_sockets(), gpus, 2);
  for (const RankBinding& b : numa) {
    CHECK(b.cpus == range(16, 31));
    CHECK(b.memory_node == 1);
  }
  // --devices 1 of CUDA_VISIBLE_DEVICES=6,2: the second visible GPU, physical 2, on node 0.
  const auto one = plan_bindings(BindMode::numa, two_sockets(), gpus_for(sys, "1", "6,2"), 1);
  CHECK(one[0].gpu->device == "2");
  CHECK(one[0].cpus == range(0, 15));
  CHECK(one[0].memory_node == 0);
}

TEST_CASE("binding plan: --bind core with all 8 GPUs: two cores each, on its GPU's node", "[launcher][binding]") {
  const FakeSysfs sys;
  const auto plan = plan_bindings(BindMode::core, two_sockets(), gpus_for(sys, "all"), 8);
  REQUIRE(plan.size() == 8);
  for (int r = 0; r < 8; ++r) {
    CHECK(plan[static_cast<std::size_t>(r)].cpus == range(4 * r, 4 * r + 3));
    CHECK(plan[static_cast<std::size_t>(r)].memory_node == (r < 4 ? 0 : 1));
  }
  // One GPU per node: each rank gets its whole node.
  const auto spread = plan_bindings(BindMode::core, two_sockets(), gpus_for(sys, "0,4"), 2);
  CHECK(spread[0].cpus == range(0, 15));
  CHECK(spread[1].cpus == range(16, 31));
}

TEST_CASE("binding plan: --bind without GPUs: local ranks fill the NUMA nodes in blocks", "[launcher][binding]") {
  const auto numa = plan_bindings(BindMode::numa, two_sockets(), {}, 4);
  REQUIRE(numa.size() == 4);
  CHECK(numa[0].cpus == range(0, 15));
  CHECK(numa[1].cpus == range(0, 15));
  CHECK(numa[2].cpus == range(16, 31));
  CHECK(numa[3].memory_node == 1);
  CHECK_FALSE(numa[0].gpu);
  const auto core = plan_bindings(BindMode::core, two_sockets(), {}, 4);
  CHECK(core[0].cpus == range(0, 7));
  CHECK(core[1].cpus == range(8, 15));
  CHECK(core[2].cpus == range(16, 23));
  CHECK(core[3].cpus == range(24, 31));
  // Cores that do not divide evenly: 5 ranks on one node of 8 cores get 2, 2, 2, 1 and 1 cores.
  const auto five = plan_bindings(BindMode::core, load_machine_layout({"numa:1 core:8 pu:1", ""}, {}), {}, 5);
  CHECK(five[0].cpus == Cpus{0, 1});
  CHECK(five[2].cpus == Cpus{4, 5});
  CHECK(five[3].cpus == Cpus{6});
  CHECK(five[4].cpus == Cpus{7});
  CHECK_FALSE(five[4].shared_cores);
}

TEST_CASE("binding plan: --bind core with more ranks than cores shares cores round-robin, and says so", "[launcher][binding]") {
  // Allowed only 2 cores of node 0: node 1 takes no CPU rank, node 0's cores go round.
  const auto plan = plan_bindings(BindMode::core, two_sockets(Cpus{0, 1, 2, 3}), {}, 3);
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].cpus == Cpus{0, 1});
  CHECK(plan[1].cpus == Cpus{2, 3});
  CHECK(plan[2].cpus == Cpus{0, 1});
  CHECK(plan[2].shared_cores);
}

TEST_CASE("binding plan: --bind keeps to the launcher's own CPUs", "[launcher][binding]") {
  const FakeSysfs sys;
  // taskset -c 0-3,16-19 fastrun ...: a rank on node 1 gets that node's allowed CPUs only.
  const auto plan = plan_bindings(BindMode::numa, two_sockets(Cpus{0, 1, 2, 3, 16, 17, 18, 19}), gpus_for(sys, "5"), 1);
  CHECK(plan[0].cpus == range(16, 19));
  // Allowed nothing on node 1: the GPU, its address and the node are named.
  CHECK_THROWS_WITH(plan_bindings(BindMode::numa, two_sockets(range(0, 15)), gpus_for(sys, "5"), 1),
                    Catch::Contains("GPU 5 (PCI 0000:ab:00.0) is on NUMA node 1") && Catch::Contains("--bind none"));
}

TEST_CASE("binding plan: --bind none plans nothing", "[launcher][binding]") {
  const FakeSysfs sys;
  CHECK(plan_bindings(BindMode::none, two_sockets(), gpus_for(sys, "2,3"), 2).empty());
  CHECK(plan_bindings(BindMode::none, two_sockets(), {}, 4).empty());
}

TEST_CASE("a GPU without a NUMA node binds to its local CPUs, without a memory policy", "[launcher][binding]") {
  GpuLocality g;
  g.device = "0";
  g.pci_bus_id = "0000:01:00.0";
  g.numa_node = -1;
  g.local_cpus = range(0, 31);
  const auto numa = plan_bindings(BindMode::numa, two_sockets(range(0, 5)), {g}, 1);
  CHECK(numa[0].cpus == range(0, 5));
  CHECK(numa[0].memory_node == -1);
  const auto core = plan_bindings(BindMode::core, two_sockets(), {g, g}, 2);
  CHECK(core[0].cpus == range(0, 15));  // the whole machine's 16 cores, split
  CHECK(core[1].cpus == range(16, 31));
  CHECK(core[1].memory_node == -1);
}

TEST_CASE("binding plan: --bind's bad input is named with what is accepted", "[launcher][binding]") {
  CHECK(parse_bind_mode("core", "--bind") == BindMode::core);
  CHECK_THROWS_WITH(parse_bind_mode("foo", "--bind"),
                    Catch::Contains("--bind 'foo'") && Catch::Contains("none") && Catch::Contains("numa") &&
                        Catch::Contains("core"));
  const FakeSysfs sys;
  CHECK_THROWS_WITH(gpu_locality("8", sys.root()), Catch::Contains("GPU 8 has no PCI device") &&
                                                       Catch::Contains("8 NVIDIA GPUs") &&
                                                       Catch::Contains("0000:db:00.0") && Catch::Contains("--bind none"));
  CHECK_THROWS_WITH(gpu_locality("GPU-0d5e", sys.root()), Catch::Contains("GPU-0d5e"));
  CHECK_THROWS_WITH(gpu_locality("MIG-0d5e", sys.root()), Catch::Contains("MIG-0d5e") && Catch::Contains("--bind none"));
  fs::remove(sys.dir.path() / "sys/bus/pci/devices/0000:18:00.0/numa_node");
  CHECK_THROWS_WITH(gpu_locality("0", sys.root()), Catch::Contains("0000:18:00.0/numa_node"));
  const test::TempDir empty;
  CHECK_THROWS_WITH(gpu_locality("0", empty.str()), Catch::Contains("0 NVIDIA GPUs are listed"));
}

TEST_CASE("GPU-<uuid> tokens are found through the driver's information files", "[launcher][binding]") {
  test::TempDir dir;
  const fs::path gpus = dir.path() / "proc/driver/nvidia/gpus";
  write(gpus / "0000:3b:00.0/information", "Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-aaaa-1111\nBus Location: \t 0000:3b:00.0\n");
  write(gpus / "0000:86:00.0/information", "Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-bbbb-2222\nBus Location: \t 0000:86:00.0\n");
  for (const char* bdf : {"0000:3b:00.0", "0000:86:00.0"}) {
    const fs::path dev = dir.path() / "sys/bus/pci/devices" / bdf;
    write(dev / "numa_node", bdf[5] == '3' ? "0\n" : "1\n");
    write(dev / "local_cpulist", bdf[5] == '3' ? "0-7,16-23\n" : "8-15,24-31\n");
  }
  CHECK(nvidia_gpu_bus_ids(dir.str()) == std::vector<std::string>{"0000:3b:00.0", "0000:86:00.0"});
  const GpuLocality g = gpu_locality("GPU-bbbb", dir.str());  // a prefix, as CUDA accepts
  CHECK(g.pci_bus_id == "0000:86:00.0");
  CHECK(g.numa_node == 1);
  CHECK(g.local_cpus == Cpus{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
  CHECK_THROWS_WITH(gpu_locality("GPU-cccc", dir.str()),
                    Catch::Contains("GPU-cccc") && Catch::Contains("GPU-aaaa-1111, GPU-bbbb-2222"));
}

TEST_CASE("CPU lists in the kernel's form", "[launcher][binding]") {
  CHECK(parse_cpu_list("0-3,8,10-11\n", "x") == Cpus{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list("", "x").empty());
  CHECK(format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(format_cpu_list({}).empty());
  for (const char* bad : {"a", "3-1", "1,,2", "-1", "1-"})
    CHECK_THROWS_WITH(parse_cpu_list(bad, "local_cpulist"),
                      Catch::Contains("local_cpulist") && Catch::Contains(std::string("'") + bad + "'"));
}

// --bind and --report-bindings end to end on this machine: real ranks started by the fastrun CLI
// (and by launch_self) read where they run from /proc/self/status and numa_maps, and that must
// be what the report printed. GPU ranks use a fake sysfs tree (FASTRUN_SYSFS_ROOT) whose GPUs sit
// on this machine's node 0 and CPUs; the CUDA_VISIBLE_DEVICES tokens are never opened.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fastrun/launcher/binding/binding_plan.h"
#include "fastrun/launcher/binding/topology.h"
#include "fastrun/launcher/cli.h"
#include "fastrun/runtime/error.h"
#include "process_runner.h"
#include "test_support/skip.h"

using namespace fastrun::test;
using fastrun::launcher::format_cpu_list;
using fastrun::launcher::own_affinity;
using Strings = std::vector<std::string>;
namespace fs = std::filesystem;

namespace {

struct Placement {
  std::string cpus;    // Cpus_allowed_list
  std::string policy;  // numa_maps' policy of the stack: "default", "prefer:0", ...
};

Placement read_placement(const fs::path& p) {
  Placement out;
  std::istringstream in(read_file(p));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) out.cpus = line.substr(line.find_first_not_of(" \t", 18));
    if (line.rfind("policy: ", 0) == 0) out.policy = line.substr(8);
  }
  return out;
}

// The report's row for global rank `rank`: its words (rank, local, gpu, pci, numa, cpus, memory...).
Strings report_row(const std::string& err, int rank) {
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    Strings w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() >= 7 && w[0] == std::to_string(rank)) return w;
  }
  FAIL("no report row for rank " << rank << " in:\n" << err);
  return {};
}

// A fake sysfs with two GPUs on node 0 whose local CPUs are the ones this test may run on.
void fake_two_gpus(const fs::path& root) {
  const fs::path driver = root / "sys/bus/pci/drivers/nvidia";
  fs::create_directories(driver);
  for (const char* bdf : {"0000:3b:00.0", "0000:5e:00.0"}) {
    const fs::path dev = root / "sys/bus/pci/devices" / bdf;
    fs::create_directories(dev);
    std::ofstream(dev / "class") << "0x030200\n";
    std::ofstream(dev / "numa_node") << "0\n";
    std::ofstream(dev / "local_cpulist") << format_cpu_list(own_affinity()) << "\n";
    fs::create_directory_symlink(dev, driver / bdf);
  }
}

}  // namespace

TEST_CASE("cli parses --bind and --report-bindings", "[launcher][binding][cli]") {
  using fastrun::launcher::BindMode;
  using fastrun::launcher::parse_cli;
  auto a = parse_cli({"--nproc", "2", "--bind", "numa", "--report-bindings", "prog"});
  CHECK(a.job.bind == BindMode::numa);
  CHECK(a.job.report_bindings);
  CHECK(parse_cli({"--nproc", "2", "--bind=core", "prog"}).job.bind == BindMode::core);
  a = parse_cli({"--nproc", "2", "prog"});
  CHECK_FALSE(a.job.bind);  // not given: FASTRUN_BIND decides, default none
  CHECK_FALSE(a.job.report_bindings);
  CHECK_THROWS_AS(parse_cli({"--nproc", "2", "--bind", "sockets", "prog"}), fastrun::ConfigError);
  CHECK_THROWS_WITH(parse_cli({"--nproc", "2", "--report-bindings=yes", "prog"}), Catch::Contains("takes no value"));
  CHECK_THROWS_WITH(parse_cli({"--nproc", "2", "--bind"}), Catch::Contains("--bind needs a value"));
}

TEST_CASE("fastrun --bind core: each rank runs on the cores the report gives it", "[launcher][binding]") {
  TempDir dir;
  const auto r = run(cmd({"--nproc", "2", "--bind", "core", "--report-bindings"}, {"--placement", dir.str() + "/p-%r"}));
  REQUIRE(r.exit_code == 0);
  INFO(r.err);
  CHECK(contains(r.err, "fastrun: bindings (--bind core"));
  const std::vector<int> mine = own_affinity();
  std::vector<std::string> seen;
  for (int rank = 0; rank < 2; ++rank) {
    const Strings row = report_row(r.err, rank);
    const Placement p = read_placement(dir.path() / ("p-" + std::to_string(rank)));
    CHECK(p.cpus == row[5]);
    CHECK(p.policy == "prefer:" + row[4]);  // memory prefers the rank's node (column numa)
    CHECK(row[row.size() - 2] + ":" + row.back() == p.policy);  // column memory: "prefer 0"
    seen.push_back(p.cpus);
  }
  // With two CPUs or more, the two ranks' cores are disjoint; they cover what the launcher had
  // only on a one-socket machine (this test's), so just the disjointness is checked.
  if (mine.size() >= 2) CHECK(seen[0] != seen[1]);
}

TEST_CASE("fastrun --bind none changes nothing: ranks run where the launcher may", "[launcher][binding]") {
  TempDir dir;
  const auto r = run(cmd({"--nproc", "2", "--bind", "none", "--report-bindings"}, {"--placement", dir.str() + "/p-%r"}),
                     {{"FASTRUN_BIND", "core"}});  // the flag wins over the variable
  REQUIRE(r.exit_code == 0);
  const std::string mine = format_cpu_list(own_affinity());
  CHECK(contains(r.err, mine + " (inherited)"));
  for (int rank = 0; rank < 2; ++rank) {
    const Placement p = read_placement(dir.path() / ("p-" + std::to_string(rank)));
    CHECK(p.cpus == mine);
    CHECK(p.policy == "default");
  }
  // Unset, the default is none as well, and nothing is reported.
  const auto plain = run(cmd({"--nproc", "1"}, {"--placement", dir.str() + "/q-%r"}));
  REQUIRE(plain.exit_code == 0);
  CHECK_FALSE(contains(plain.err, "bindings"));
  CHECK(read_placement(dir.path() / "q-0").cpus == mine);
}

// hwloc's library is opened only for a binding: a job with the default --bind none does not load
// it (nor the libudev it brings) into the launcher, whose mappings its rank reads.
TEST_CASE("fastrun loads hwloc only when a binding needs the topology", "[launcher][binding]") {
  const Strings maps_of_launcher = {"sh", "-c", "cat /proc/$PPID/maps"};
  auto plain = cmd({"--nproc", "1"}, {});
  plain.pop_back();  // the sparring partner: the rank is the shell instead
  plain.insert(plain.end(), maps_of_launcher.begin(), maps_of_launcher.end());
  const auto r = run(plain);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "libc.so"));  // what is read is the launcher's maps
  CHECK_FALSE(contains(r.out, "libhwloc"));
  CHECK_FALSE(contains(r.out, "libudev"));

  auto bound = cmd({"--nproc", "1", "--bind", "core"}, {});
  bound.pop_back();
  bound.insert(bound.end(), maps_of_launcher.begin(), maps_of_launcher.end());
  const auto b = run(bound);
  REQUIRE(b.exit_code == 0);
  CHECK(contains(b.out, "libhwloc"));
}

// Where hwloc's library cannot be loaded, a binding is a usage error naming it and its package,
// before any rank starts (until 2026-12-06 the launcher aborted on an uncaught exception). The
// library is hidden in a mount namespace of the run's own: root only.
TEST_CASE("fastrun --bind core where hwloc's library cannot be loaded: exit 2 naming it", "[launcher][binding]") {
  if (::geteuid() != 0) fastrun::test::skip_case("needs root: hides libhwloc in a mount namespace of its own");
  TempDir dir;
  const std::string hide =
      "lib=$(ldconfig -p | awk '/libhwloc\\.so\\.15 /{print $NF; exit}'); "
      "if [ -n \"$lib\" ]; then mount --bind /dev/null \"$lib\" || exit 77; fi; exec \"$@\"";
  const std::string unshare = fs::exists("/usr/bin/unshare") ? "/usr/bin/unshare" : "/bin/unshare";
  if (!fs::exists(unshare)) fastrun::test::skip_case("no unshare(1) (util-linux)");
  if (run({unshare, "-m", "/bin/true"}).exit_code != 0) fastrun::test::skip_case("no mount namespace of its own here");
  Strings c = {unshare, "-m", "/bin/sh", "-c", hide, "sh"};
  const Strings f = cmd({"--nproc", "1", "--bind", "core"}, {"--placement", dir.str() + "/p-%r"});
  c.insert(c.end(), f.begin(), f.end());
  const auto r = run(c);
  if (r.exit_code == 77) fastrun::test::skip_case("cannot mount in a mount namespace of its own here");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "fastrun: --bind and --report-bindings read the CPU topology with hwloc, whose library could "
                        "not be loaded"));
  CHECK(contains(r.err, "apt-get install libhwloc15"));
  CHECK_FALSE(fs::exists(dir.path() / "p-0"));  // no rank started
}

TEST_CASE("FASTRUN_BIND=numa binds like --bind numa", "[launcher][binding]") {
  TempDir dir;
  const auto r = run(cmd({"--nproc", "2"}, {"--placement", dir.str() + "/p-%r"}),
                     {{"FASTRUN_BIND", "numa"}, {"FASTRUN_REPORT_BINDINGS", "1"}});
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.err, "--bind numa"));
  for (int rank = 0; rank < 2; ++rank) {
    const Strings row = report_row(r.err, rank);
    const Placement p = read_placement(dir.path() / ("p-" + std::to_string(rank)));
    CHECK(p.cpus == row[5]);
    CHECK(p.policy == "prefer:" + row[4]);
  }
}

TEST_CASE("fastrun --bind numa with GPUs: the physical GPU's PCI device in the report", "[launcher][binding]") {
  TempDir dir;
  fake_two_gpus(dir.path() / "root");
  const std::map<std::string, std::optional<std::string>> env = {
      {"FASTRUN_SYSFS_ROOT", dir.str() + "/root"}, {"CUDA_VISIBLE_DEVICES", "1"}};
  const auto r = run(cmd({"--devices", "all", "--bind", "numa", "--report-bindings"},
                         {"--placement", dir.str() + "/p-%r"}),
                     env);
  REQUIRE(r.exit_code == 0);
  INFO(r.err);
  const Strings row = report_row(r.err, 0);
  CHECK(row[2] == "1");              // physical GPU 1 ...
  CHECK(row[3] == "0000:5e:00.0");   // ... the second in PCI order
  CHECK(row[4] == "0");
  const Placement p = read_placement(dir.path() / "p-0");
  CHECK(p.cpus == row[5]);
  CHECK(p.policy == "prefer:0");
  // A GPU the sysfs does not list: a usage error naming it, before any rank starts.
  auto missing = env;
  missing["CUDA_VISIBLE_DEVICES"] = "0,7";
  const auto bad = run(cmd({"--devices", "all", "--bind", "core"}, {"--exit", "0"}), missing);
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "GPU 7 has no PCI device"));
  CHECK(contains(bad.err, "--bind none"));
  // --bind none needs no locality: the same job runs.
  CHECK(run(cmd({"--devices", "all", "--bind", "none", "--report-bindings"}, {"--exit", "0"}), missing).exit_code == 0);
}

TEST_CASE("fastrun --bind and FASTRUN_BIND name a bad value and what is accepted", "[launcher][binding]") {
  const auto r = run(cmd({"--nproc", "1", "--bind", "foo"}, {"--exit", "0"}));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--bind 'foo': accepted values are none"));
  const auto e = run(cmd({"--nproc", "1"}, {"--exit", "0"}), {{"FASTRUN_BIND", "sockets"}});
  CHECK(e.exit_code == 2);
  CHECK(contains(e.err, "FASTRUN_BIND"));
  CHECK(contains(e.err, "sockets"));
}

TEST_CASE("launch_self with bind = core binds rank 0 itself and its children", "[launcher][binding]") {
  TempDir dir;
  const auto r = run({kPartner, "--self", "2", "--self-bind", "core", "--placement", dir.str() + "/p-%r"});
  REQUIRE(r.exit_code == 0);
  const Placement p0 = read_placement(dir.path() / "p-0");
  const Placement p1 = read_placement(dir.path() / "p-1");
  CHECK(p0.policy.rfind("prefer:", 0) == 0);
  CHECK(p1.policy.rfind("prefer:", 0) == 0);
  if (own_affinity().size() >= 2) CHECK(p0.cpus != p1.cpus);
  CHECK(p0.cpus != "");
}

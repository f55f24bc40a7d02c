// A LibTorch program under fastrun loads one LibTorch, and, built against PyPI's CUDA wheel, the
// wheel's NCCL (docs/torch.md, "LibTorch from a wheel"): tests/torch/loaded_libraries.cpp run by
// `fastrun --nproc 2` prints what the loader mapped. Against Debian's libtorch-dev the same case
// checks that only that LibTorch is loaded.
#include <algorithm>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "job_runner.h"  // tests/ddp
#include "test_support/skip.h"

namespace fs = std::filesystem;
using fastrun::test::run_job;

namespace {

struct Loaded {
  std::vector<fs::path> torch;  // libtorch*, libc10*
  std::vector<fs::path> nccl, cudart, gloo;
  int sums = 0;  // ranks that printed the all-reduced sum 1 + 2
};

Loaded parse(const std::string& output) {
  Loaded l;
  std::istringstream in(output);
  std::vector<int> ranks_with_sum;
  std::vector<fs::path> seen;
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find(" library ");
    if (line.rfind("rank ", 0) != 0 || at == std::string::npos) continue;
    const int rank = std::stoi(line.substr(5));
    if (line.find(" sum 3 ") != std::string::npos &&
        std::find(ranks_with_sum.begin(), ranks_with_sum.end(), rank) == ranks_with_sum.end())
      ranks_with_sum.push_back(rank);
    const fs::path path = line.substr(at + 9);
    if (std::find(seen.begin(), seen.end(), path) != seen.end()) continue;  // each rank prints its own
    seen.push_back(path);
    const std::string name = path.filename().string();
    if (name.rfind("libtorch", 0) == 0 || name.rfind("libc10", 0) == 0) l.torch.push_back(path);
    if (name.rfind("libnccl", 0) == 0) l.nccl.push_back(path);
    if (name.rfind("libcudart", 0) == 0) l.cudart.push_back(path);
    if (name.rfind("libgloo", 0) == 0) l.gloo.push_back(path);
  }
  l.sums = static_cast<int>(ranks_with_sum.size());
  return l;
}

fs::path dir_of(const fs::path& p) { return fs::weakly_canonical(p).parent_path(); }

bool under(const fs::path& p, const fs::path& root) {
  const auto c = fs::weakly_canonical(p).string(), r = fs::weakly_canonical(root).string() + "/";
  return c.rfind(r, 0) == 0;
}

Loaded run_probe(const std::string& ld_library_path) {
  std::vector<std::string> argv{"/usr/bin/env", "FASTRUN_BACKEND=gloo"};
  if (!ld_library_path.empty()) argv.push_back("LD_LIBRARY_PATH=" + ld_library_path);
  for (const char* a : {FASTRUN_BIN, "--nproc", "2", LOADED_LIBRARIES_BIN}) argv.emplace_back(a);
  const auto r = run_job(argv, std::chrono::seconds(120));
  INFO("output:\n" << r.output);
  REQUIRE(r.exit_code == 0);
  auto l = parse(r.output);
  CHECK(l.sums == 2);
  // One LibTorch: every libtorch*/libc10* from the folder of the libtorch this was linked with.
  REQUIRE(!l.torch.empty());
  for (const auto& p : l.torch) CHECK(dir_of(p) == fs::weakly_canonical(FASTRUN_TORCH_LIB_DIR));
  // fastrun's gloo module loaded its own libgloo (PyPI's LibTorch has another gloo built in).
  CHECK(!l.gloo.empty());
  return l;
}

}  // namespace

TEST_CASE("LibTorch program under fastrun: its libraries come from the LibTorch it was built with, NCCL from the wheel",
          "[torch][libraries]") {
  const fs::path wheel_nvidia = FASTRUN_TORCH_WHEEL_NVIDIA_DIR;  // "" for a LibTorch that is not a CUDA wheel
  SECTION("as built, with no LD_LIBRARY_PATH") {
    const auto l = run_probe("");
    if (!wheel_nvidia.empty()) {
      // libtorch_cuda.so needs libnccl.so.2 and finds it through its own RPATH in the wheel.
      REQUIRE(l.nccl.size() == 1);
      CHECK(under(l.nccl.front(), wheel_nvidia));
    }
  }
  if (wheel_nvidia.empty()) return;
  SECTION("with a CUDA toolkit's folder holding another NCCL on LD_LIBRARY_PATH") {
    const fs::path toolkit_lib = "/usr/local/cuda/lib";
    if (!fs::exists(toolkit_lib / "libnccl.so.2")) {
      fastrun::test::skip_case("no other NCCL here (/usr/local/cuda/lib/libnccl.so.2) to put on LD_LIBRARY_PATH");
      return;
    }
    const auto l = run_probe(toolkit_lib.string());
    REQUIRE(l.nccl.size() == 1);
    CHECK(under(l.nccl.front(), wheel_nvidia));
  }
  SECTION("with the wheel's nvidia/*/lib folders on LD_LIBRARY_PATH (docs/torch.md): CUDA's runtime from the wheel too") {
    // docs/torch.md's command, word for word, run by the venv's python.
    std::string command = "'";  // (+= rather than +: GCC 12's -Warray-bounds misfires on the latter at -O2)
    command += FASTRUN_TORCH_REFERENCE_PYTHON;
    command += R"(' -c 'import glob, os, torch; print(":".join(glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib"))))' 2>/dev/null)";
    std::string path;
    if (FILE* p = ::popen(command.c_str(), "r")) {
      char buf[4096];
      while (std::fgets(buf, sizeof buf, p) != nullptr) path += buf;
      ::pclose(p);
    }
    while (!path.empty() && path.back() == '\n') path.pop_back();
    INFO("LD_LIBRARY_PATH=" << path);
    REQUIRE(path.find("nvidia") != std::string::npos);
    const auto l = run_probe(path);
    REQUIRE(l.nccl.size() == 1);
    CHECK(under(l.nccl.front(), wheel_nvidia));
    REQUIRE(!l.cudart.empty());
    for (const auto& p : l.cudart) CHECK(under(p, wheel_nvidia));
  }
}

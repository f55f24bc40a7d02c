#include "torch_filestore.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <boost/process.hpp>
#include <fmt/format.h>

namespace fastrun::bench {
namespace {

namespace bp = boost::process;
namespace fs = std::filesystem;

// Installed beside the binary (share/fastrun), or read from the source tree of this build.
std::string find_script() {
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe").parent_path();
  for (const fs::path& p : {exe_dir / "../share/fastrun/torch_filestore.py",
                            fs::path(FASTRUN_BENCH_SOURCE_DIR) / "torch_filestore.py"})
    if (fs::exists(p)) return p.string();
  return "";
}

// The first python3 that imports torch.distributed: the one on PATH, else Debian's (a pyenv
// or venv python3 usually lacks python3-torch).
std::string find_python() {
  std::vector<std::string> candidates;
  std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string d; std::getline(path, d, ':');)
    if (!d.empty()) candidates.push_back(d + "/python3");
  candidates.push_back("/usr/bin/python3");
  for (const auto& py : candidates) {
    std::error_code ec;
    if (::access(py.c_str(), X_OK) != 0) continue;
    bp::child c(py, "-c", "import torch.distributed", bp::std_out > bp::null, bp::std_err > bp::null, ec);
    if (ec) continue;
    c.wait(ec);
    if (!ec && c.exit_code() == 0) return py;
  }
  return "";
}

}  // namespace

std::map<int, double> torch_filestore_rates(double seconds, const std::string& dir, const std::string& pattern,
                                            std::string& why) {
  const std::string script = find_script();
  if (script.empty()) {
    why = "bench/torch_filestore.py not found";
    return {};
  }
  const std::string python = find_python();
  if (python.empty()) {
    why = "no python3 here imports torch (apt-get install python3-torch)";
    return {};
  }
  bp::ipstream out;
  std::error_code ec;
  // The script reaps its own clients and ends within seconds + 60 per count.
  bp::child c(python, script, fmt::format("{}", seconds), dir, pattern, "1", "4", bp::std_out > out, ec);
  if (ec) {
    why = fmt::format("could not start {}: {}", python, ec.message());
    return {};
  }
  std::map<int, double> rates;
  std::string line;
  while (std::getline(out, line)) {
    std::istringstream in(line);
    int procs = 0;
    double rate = 0;
    if (in >> procs >> rate) rates[procs] = rate;
  }
  c.wait(ec);
  if (ec || c.exit_code() != 0 || rates.size() != 2) {
    why = fmt::format("{} {} failed (exit {})", python, script, ec ? -1 : c.exit_code());
    return {};
  }
  return rates;
}

}  // namespace fastrun::bench

#include "fastrun/launcher/binding/gpu_locality.h"

#include <dirent.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/text/number.h"

namespace fastrun::launcher {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

// "0000:3b:00.0": domain:bus:device.function, lower-case hex as sysfs writes it.
bool is_pci_address(const std::string& s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

std::string sorted_list(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? std::string("none") : fmt::format("{}", fmt::join(v, ", "));
}

std::string places(const std::string& root) {
  return fmt::format("{0}/proc/driver/nvidia/gpus, {0}/sys/bus/pci/drivers/nvidia", root);
}

// The PCI address of the GPU whose `information` file names `uuid` (a prefix, as CUDA accepts).
std::string bus_id_of_uuid(const std::string& uuid, const std::string& root) {
  const std::string dir = root + "/proc/driver/nvidia/gpus";
  std::vector<std::string> seen;
  for (const std::string& bdf : entries(dir)) {
    if (!is_pci_address(bdf)) continue;
    const auto info = read_text(dir + "/" + bdf + "/information");
    if (!info) continue;
    std::istringstream lines(*info);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("GPU UUID:", 0) != 0) continue;
      std::string value = line.substr(9);
      value.erase(0, value.find_first_not_of(" \t"));
      value = trimmed(value);
      seen.push_back(value);
      if (value.rfind(uuid, 0) == 0) return bdf;
    }
  }
  throw ConfigError(fmt::format("--bind: GPU {} is not among the GPUs of {} (UUIDs found: {}); use --bind none",
                                uuid, dir, sorted_list(seen)));
}

}  // namespace

std::string sysfs_root() {
  std::string root = env::find_string(env::kSysfsRoot).value_or("");
  while (!root.empty() && root.back() == '/') root.pop_back();
  return root;
}

std::vector<std::string> nvidia_gpu_bus_ids(const std::string& root) {
  std::vector<std::string> ids;
  for (const std::string& e : entries(root + "/proc/driver/nvidia/gpus"))
    if (is_pci_address(e)) ids.push_back(e);
  if (ids.empty()) {
    for (const std::string& e : entries(root + "/sys/bus/pci/drivers/nvidia")) {
      if (!is_pci_address(e)) continue;
      // 0x03xxxx: display controllers (VGA 0x0300, 3D 0x0302); an NVSwitch is a bridge (0x0680).
      const auto cls = read_text(root + "/sys/bus/pci/devices/" + e + "/class");
      if (cls && cls->rfind("0x03", 0) == 0) ids.push_back(e);
    }
  }
  std::sort(ids.begin(), ids.end());  // fixed-width lower-case hex: text order is PCI order
  return ids;
}

GpuLocality gpu_locality(const std::string& token, const std::string& root) {
  GpuLocality g;
  g.device = token;
  if (token.rfind("MIG-", 0) == 0) {
    throw ConfigError(fmt::format("--bind: GPU {} is a MIG instance, whose GPU's PCI device cannot be found without "
                                  "NVML; use --bind none, or list whole GPUs in CUDA_VISIBLE_DEVICES",
                                  token));
  }
  if (token.rfind("GPU-", 0) == 0) {
    g.pci_bus_id = bus_id_of_uuid(token, root);
  } else {
    const std::vector<std::string> ids = nvidia_gpu_bus_ids(root);
    const auto index = text::to_integer(token, 0, static_cast<std::int64_t>(ids.size()) - 1);
    if (!index) {
      throw ConfigError(fmt::format("--bind: GPU {} has no PCI device: {} NVIDIA GPU{} listed in {} ({}); give GPUs "
                                    "0..{} or use --bind none, which needs no locality",
                                    token, ids.size(), ids.size() == 1 ? " is" : "s are", places(root),
                                    sorted_list(ids), ids.empty() ? 0 : ids.size() - 1));
    }
    g.pci_bus_id = ids[static_cast<std::size_t>(*index)];
  }
  const std::string dev = root + "/sys/bus/pci/devices/" + g.pci_bus_id;
  const auto node = read_text(dev + "/numa_node");
  const auto cpus = read_text(dev + "/local_cpulist");
  if (!node || !cpus) {
    throw ConfigError(fmt::format("--bind: GPU {} (PCI {}): cannot read {}/{}; use --bind none", token, g.pci_bus_id,
                                  dev, node ? "local_cpulist" : "numa_node"));
  }
  const std::string n = trimmed(*node);
  const auto numa_node = text::to_integer(n, -1, INT_MAX);
  if (!numa_node) {
    throw ConfigError(fmt::format("--bind: GPU {} (PCI {}): {}/numa_node is '{}', expected a node number or -1", token,
                                  g.pci_bus_id, dev, n));
  }
  g.numa_node = static_cast<int>(*numa_node);
  g.local_cpus = parse_cpu_list(*cpus, fmt::format("{}/local_cpulist", dev));
  return g;
}

}  // namespace fastrun::launcher

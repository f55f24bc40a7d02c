#pragma once
// Device planning (docs/devices.md): turns `--devices LIST|all` and the user's
// CUDA_VISIBLE_DEVICES into one device token per rank. Pure: no environment, no GPU, so it is
// tested with tables (tests/launcher/device_plan_test.cpp).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fastrun::launcher {

struct DevicePlan {
  // CUDA_VISIBLE_DEVICES of rank i: exactly one token ("3", "GPU-…", "MIG-…").
  std::vector<std::string> rank_devices;
  // USER_CUDA_VISIBLE_DEVICES of every rank: the user's original value, or "0,1,…,n-1".
  std::string user_visible;
};

// spec: "all" or a comma-separated list of indices into the visible devices, in rank order.
// cuda_visible_devices: the user's CUDA_VISIBLE_DEVICES (nullopt = unset); its tokens are the
// visible devices. physical_count: GPUs found without a CUDA context; read only when
// cuda_visible_devices is unset.
// Throws ConfigError: for a malformed list (check_device_spec) naming the entry and what is
// accepted; for duplicates and out-of-range indices naming the entry and the valid range; for a
// malformed CUDA_VISIBLE_DEVICES token; for no device at all (the message then suggests --nproc).
DevicePlan plan_devices(std::string_view spec, const std::optional<std::string>& cuda_visible_devices,
                        int physical_count);

// The form of `--devices LIST|all` alone, before anything is probed: ConfigError naming the
// entry and what is accepted for "", "0,,1", "gpu0", "-1", "+1", "GPU-<uuid>" (the message says
// to put a UUID in CUDA_VISIBLE_DEVICES). plan_devices calls it first.
void check_device_spec(std::string_view spec);

// The tokens of a CUDA_VISIBLE_DEVICES value (ordinals, GPU-<uuid>, MIG-<uuid>), spaces trimmed.
// Throws ConfigError for an empty or malformed token.
std::vector<std::string> parse_visible_devices(std::string_view value);

// Number of GPUs on this machine, found without creating a CUDA context: NVML
// (libnvidia-ml.so.1 loaded at run time) when it loads, else the entries of
// /proc/driver/nvidia/gpus/. 0 when neither finds any.
int count_physical_gpus();

}  // namespace fastrun::launcher

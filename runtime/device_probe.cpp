#include "fastrun/runtime/device_probe.h"

#include <atomic>

namespace fastrun {
namespace {

// Atomic: the component may install it from a static initialiser while another thread joins.
std::atomic<DeviceIdentityProbe> g_probe{nullptr};

}  // namespace

void install_device_identity_probe(DeviceIdentityProbe probe) noexcept { g_probe.store(probe); }

std::string probe_device_identity() {
  const DeviceIdentityProbe probe = g_probe.load();
  return probe != nullptr ? probe() : "cpu";
}

}  // namespace fastrun

#pragma once
// fastrun's version, for --version and log lines.
namespace fastrun {
inline constexpr const char* kVersion = "0.1.0";
}

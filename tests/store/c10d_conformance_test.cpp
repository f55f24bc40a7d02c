// Registers c10d:// with the store conformance suite (conformance.h), once per real
// torch.distributed.TCPStore server this machine has (test_support/torch_python.h): torch 1.13's
// ("c10d", Debian's /usr/bin/python3) and torch 2.x's libuv and legacy ones ("c10d-torch2-libuv",
// "c10d-torch2-legacy", tools/install-torch2.sh's venv). Every contract case and every
// real-process case runs fastrun's c10d client against each, one server per case. A server that
// is absent registers nothing; the case below reports it as skipped, with the reason.
#include <catch2/catch.hpp>

#include "conformance.h"
#include "fastrun/runtime/store/c10d/c10d_protocol.h"
#include "test_support/skip.h"
#include "test_support/torch_python.h"

namespace fastrun::test {
namespace {

const bool registered = [] {
  if (torch_python_available())
    RegisterStoreKind{{"c10d", [] { return std::make_unique<TorchStoreServer>(TorchServer::torch1); }}};
  if (torch2_python_available()) {
    // The libuv server closes the connection on a value over 8 MiB (c10d_protocol.h).
    RegisterStoreKind{{"c10d-torch2-libuv",
                       [] { return std::make_unique<TorchStoreServer>(TorchServer::torch2_libuv); },
                       true, c10d_wire::kLibuvMaxValue}};
    RegisterStoreKind{{"c10d-torch2-legacy",
                       [] { return std::make_unique<TorchStoreServer>(TorchServer::torch2_legacy); }}};
  }
  return true;
}();

bool registered_kind(const std::string& name) {
  for (const auto& k : store_kinds_under_test())
    if (k.name == name) return true;
  return false;
}

TEST_CASE("c10d store: the conformance suite runs against torch 1.13's server", "[store][c10d]") {
  if (!torch_python_available()) return skip_case(no_torch_reason());
  CHECK(registered_kind("c10d"));
}

TEST_CASE("c10d store: the conformance suite runs against torch 2.x's libuv and legacy servers", "[store][c10d]") {
  if (!torch2_python_available()) return skip_case(no_torch2_reason());
  CHECK(registered_kind("c10d-torch2-libuv"));
  CHECK(registered_kind("c10d-torch2-legacy"));
}

}  // namespace
}  // namespace fastrun::test

// Registers c10d:// with the store conformance suite (conformance.h) when /usr/bin/python3 has
// torch: every contract case and every real-process case runs fastrun's c10d client against a
// REAL torch.distributed.TCPStore server (test_support/torch_python.h), one per case.
#include "conformance.h"
#include "test_support/torch_python.h"

namespace fastrun::test {
namespace {

const bool registered = [] {
  if (torch_python_available())
    RegisterStoreKind{{"c10d", [] { return std::make_unique<TorchStoreServer>(); }}};
  return true;
}();

}  // namespace
}  // namespace fastrun::test

// Registers tcp:// with the store conformance suite (conformance.h): every contract case and
// every real-process case (kill-mid-operation loop, 256-process rendezvous, ...) also runs
// against a fresh tcp store on 127.0.0.1 with a free port and a random token.
#include <chrono>

#include "conformance.h"
#include "fastrun/runtime/store/factory.h"

namespace fastrun::test {
namespace {

const RegisterStoreKind tcp_kind{{"tcp",
                                  [] {
                                    StoreOptions o;
                                    o.timeout = std::chrono::seconds(20);
                                    o.token = "";  // host picks a random token; children get it via token()
                                    return host_store("tcp://127.0.0.1:0", o);
                                  },
                                  true, std::size_t{16} << 20, /*server_thread=*/true}};

}  // namespace
}  // namespace fastrun::test

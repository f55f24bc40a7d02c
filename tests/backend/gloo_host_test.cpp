// FASTRUN_GLOO_HOST is checked before gloo sees it: interface names, local addresses and host
// names are turned into an address; anything else is a ConfigError that lists the interfaces.
#include <catch2/catch.hpp>

#include "fastrun/runtime/backend/gloo/gloo_host.h"
#include "fastrun/runtime/error.h"

using fastrun::resolve_gloo_host;

namespace {

std::string message_of(const std::string& value) {
  try {
    resolve_gloo_host(value);
  } catch (const fastrun::ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("gloo host: interfaces and local addresses are accepted", "[gloo][gloo_host]") {
  CHECK(resolve_gloo_host("lo") == "127.0.0.1");  // an interface name, like GLOO_SOCKET_IFNAME
  CHECK(resolve_gloo_host("127.0.0.1") == "127.0.0.1");
  CHECK(resolve_gloo_host("127.0.0.7") == "127.0.0.7");  // all of 127/8 is this machine's
  const std::string localhost = resolve_gloo_host("localhost");
  CHECK((localhost == "127.0.0.1" || localhost == "::1"));
}

TEST_CASE("gloo host: bad values are clear errors before gloo sees them", "[gloo][gloo_host]") {
  struct Case {
    const char* value;
    const char* says;
  };
  for (const Case c : {Case{"", "it is empty"}, Case{"0.0.0.0", "a wildcard address"}, Case{"::", "a wildcard address"},
                       Case{"203.0.113.77", "no interface of this machine has that address"},
                       Case{"no-such-host.invalid", "does not resolve"}, Case{"1.2.3.4.5", "does not resolve"}}) {
    const std::string m = message_of(c.value);
    INFO(m);
    CHECK(has(m, std::string("FASTRUN_GLOO_HOST='") + c.value + "'"));
    CHECK(has(m, c.says));
    CHECK(has(m, "lo (127.0.0.1"));  // names what would work
  }
}

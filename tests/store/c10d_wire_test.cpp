// The c10d client's bytes on the wire, against golden bytes written out by hand from PyTorch's
// TCPStore protocol (c10d_protocol.h; torch/csrc/distributed/c10d/TCPStore.cpp): a scripted
// server reads exactly what each call must send and answers what a real server would. The cases
// against real TCPStore servers (c10d_client_test.cpp, c10d_conformance_test.cpp) skip where
// python3-torch or torch 2.x is not installed; these run everywhere, so a wrong command byte,
// length, key prefix or field order fails here on its own.
//
// Golden bytes are hex, spaces for readability: a command byte, strings and blobs as a u64
// little-endian length and the bytes, counts u64, integers int64 (all little-endian). Every key
// carries c10d's "/" prefix (0x2f).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/store/c10d/c10d_client.h"

using namespace fastrun;
using namespace std::chrono_literals;

namespace {

Bytes hex(const std::string& text) {
  Bytes out;
  std::string digits;
  for (char c : text)
    if (c != ' ') digits += c;
  if (digits.size() % 2 != 0) throw std::invalid_argument("odd number of hex digits: " + text);
  for (std::size_t i = 0; i < digits.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  return out;
}

std::string hex_text(const Bytes& b) {
  std::string out;
  char two[4];
  for (auto v : b) {
    std::snprintf(two, sizeof two, "%02x", v);
    out += two;
  }
  return out;
}

// The pieces of the golden bytes, so each line reads as the protocol's fields.
std::string u64(std::uint64_t v) {
  std::string out;
  char two[4];
  for (int i = 0; i < 8; ++i) {
    std::snprintf(two, sizeof two, "%02x", static_cast<unsigned>((v >> (8 * i)) & 0xff));
    out += two;
  }
  return out + " ";
}
std::string str(const std::string& s) {  // u64 length, then the bytes
  std::string out = u64(s.size());
  char two[4];
  for (unsigned char c : s) {
    std::snprintf(two, sizeof two, "%02x", c);
    out += two;
  }
  return out + " ";
}

// One step of the scripted server, on connection `conn` (numbered in the order accepted).
struct Step {
  enum Kind { accept, expect, reply, hang_up } kind;
  int conn = 0;
  Bytes bytes;
  std::string what;  // the call that sends them, for messages
};
Step accept_connection() { return {Step::accept, 0, {}, "accept"}; }
Step expect(int conn, const std::string& what, const std::string& golden) {
  return {Step::expect, conn, hex(golden), what};
}
Step reply(int conn, const std::string& bytes) { return {Step::reply, conn, hex(bytes), "reply"}; }
Step hang_up(int conn) { return {Step::hang_up, conn, {}, "hang up"}; }

// Plays the script on a listening socket of 127.0.0.1 on a thread of its own. An expect step
// reads exactly as many bytes as it expects (or what came within 2 s); received() pairs each
// with what was expected. After the script it reads every connection to its end: bytes the
// client sent beyond the script are reported too.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<Step> script) : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 8) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("ScriptedServer: cannot listen on 127.0.0.1");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { play(); });
  }
  ~ScriptedServer() {
    if (thread_.joinable()) thread_.join();
    for (int fd : conns_) ::close(fd);
    ::close(listen_fd_);
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  std::uint16_t port() const { return port_; }

  struct Received {
    std::string what;
    Bytes expected, got;
  };
  // Waits for the script to end (the client must have closed its connections by then).
  std::vector<Received> received() {
    thread_.join();
    return received_;
  }
  const std::string& error() const { return error_; }

 private:
  bool readable(int fd, std::chrono::milliseconds within) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(within.count())) == 1;
  }

  Bytes read_up_to(int fd, std::size_t n) {
    Bytes got;
    std::uint8_t buf[4096];
    while (got.size() < n && readable(fd, 2s)) {
      const ssize_t r = ::recv(fd, buf, std::min(sizeof buf, n - got.size()), 0);
      if (r <= 0) break;
      got.insert(got.end(), buf, buf + r);
    }
    return got;
  }

  void play() {
    for (const Step& s : script_) {
      if (s.kind == Step::accept) {
        if (!readable(listen_fd_, 5s)) {
          error_ = "the client never connected";
          return;
        }
        conns_.push_back(::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC));
        continue;
      }
      if (s.conn >= static_cast<int>(conns_.size())) {
        error_ = "script error: no connection " + std::to_string(s.conn);
        return;
      }
      const int fd = conns_[static_cast<std::size_t>(s.conn)];
      if (s.kind == Step::expect) {
        received_.push_back({s.what, s.bytes, read_up_to(fd, s.bytes.size())});
      } else if (s.kind == Step::reply) {
        if (::send(fd, s.bytes.data(), s.bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(s.bytes.size()))
          error_ = "could not send a reply";
      } else {
        ::shutdown(fd, SHUT_RDWR);
      }
    }
    for (std::size_t c = 0; c < conns_.size(); ++c)
      if (Bytes rest = read_up_to(conns_[c], 1 << 20); !rest.empty())
        received_.push_back({"nothing more on connection " + std::to_string(c), {}, rest});
  }

  std::vector<Step> script_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::vector<int> conns_;
  std::vector<Received> received_;
  std::string error_;
  std::thread thread_;
};

void check_all(ScriptedServer& server) {
  const auto received = server.received();
  CHECK(server.error().empty());
  for (const auto& r : received) {
    INFO(r.what);
    CHECK(hex_text(r.got) == hex_text(r.expected));
  }
}

c10d_store::ClientOptions options(std::uint16_t port) {
  c10d_store::ClientOptions o;
  o.port = port;
  o.timeout = 3s;
  return o;
}

// The batched calls of both cases: a = "1", b = "22".
void multi_set_then_get(c10d_store::Client& client) {
  client.multi_set({"a", "b"}, {to_bytes("1"), to_bytes("22")});
  const auto values = client.multi_get({"a", "b"}, 1s);
  REQUIRE(values.size() == 2);
  CHECK(to_string(values[0]) == "1");
  CHECK(to_string(values[1]) == "22");
}

// The hello (c10d_protocol.h): VALIDATE (0) + magic 0x3C85F7CE, PING (13) + the nonce
// 0x66A5D710, GETNUMKEYS (7) twice. A torch 2.x server echoes the nonce and answers both.
const std::string kHello = "00 cef7853c  0d 10d7a566  07 07";
const std::string kHelloAnswer = "10d7a566 " + u64(0) + u64(0);

}  // namespace

TEST_CASE("c10d wire: torch 2.x requests carry the documented bytes", "[store][c10d][wire]") {
  const std::string ready = "00", stop_waiting = "00";
  ScriptedServer server({
      accept_connection(),
      expect(0, "hello", kHello),
      reply(0, kHelloAnswer),
      expect(0, "set(k, v): SET=1, key, value", "01 " + str("/k") + str("v")),
      expect(0, "add(n, 5): ADD=4, key, int64", "04 " + str("/n") + u64(5)),
      reply(0, u64(5)),
      expect(0, "compare_set(k, v, w): COMPARE_SET=2, key, expected, desired", "02 " + str("/k") + str("v") + str("w")),
      reply(0, str("w")),
      expect(0, "check({k, n}): CHECK=5, count, keys", "05 " + u64(2) + str("/k") + str("/n")),
      reply(0, ready),
      expect(0, "get(k) waits first: WAIT=6, count, keys", "06 " + u64(1) + str("/k")),
      reply(0, stop_waiting),
      expect(0, "get(k): GET=3, key", "03 " + str("/k")),
      reply(0, str("w")),
      expect(0, "delete_key(k): DELETE_KEY=8, key", "08 " + str("/k")),
      reply(0, u64(1)),
      expect(0, "num_keys(): GETNUMKEYS=7", "07"),
      reply(0, u64(3)),
      expect(0, "multi_set({a, b}, {1, 22}): MULTI_SET=11, count, key/value pairs",
             "0b " + u64(2) + str("/a") + str("1") + str("/b") + str("22")),
      expect(0, "multi_get({a, b}) waits first: WAIT=6", "06 " + u64(2) + str("/a") + str("/b")),
      reply(0, stop_waiting),
      expect(0, "multi_get({a, b}): MULTI_GET=10, count, keys", "0a " + u64(2) + str("/a") + str("/b")),
      reply(0, str("1") + str("22")),
      // A wait that times out: the keys are looked up on a second connection (its own
      // VALIDATE first), then the WAIT is cancelled with CANCEL_WAIT=12, answered WAIT_CANCELED.
      expect(0, "wait({x}): WAIT=6", "06 " + u64(1) + str("/x")),
      accept_connection(),
      expect(1, "the side connection's VALIDATE", "00 cef7853c"),
      expect(1, "the side connection's check({x}): CHECK=5", "05 " + u64(1) + str("/x")),
      reply(1, "01"),  // NOT_READY
      expect(0, "the expired wait's CANCEL_WAIT=12", "0c"),
      reply(0, "01"),  // WAIT_CANCELED
      expect(1, "the missing keys, asked one by one: CHECK=5", "05 " + u64(1) + str("/x")),
      reply(1, "01"),
  });
  {
    c10d_store::Client client(options(server.port()));
    CHECK(client.dialect() == c10d_wire::Dialect::torch2);
    client.set("k", to_bytes("v"));
    CHECK(client.add("n", 5) == 5);
    CHECK(to_string(client.compare_set("k", to_bytes("v"), to_bytes("w"))) == "w");
    CHECK(client.check({"k", "n"}));
    CHECK(to_string(client.get("k", 1s)) == "w");
    CHECK(client.delete_key("k"));
    CHECK(client.num_keys() == 3);
    multi_set_then_get(client);
    CHECK_THROWS_AS(client.wait({"x"}, 50ms), TimeoutError);
  }
  check_all(server);
}

TEST_CASE("c10d wire: torch 1.x requests carry the documented bytes", "[store][c10d][wire]") {
  // A 1.x server reads the hello as an impossible SET and hangs up; the client reconnects and
  // checks the dialect with a CHECK of no keys (CHECK=4 in 1.x, answered READY).
  ScriptedServer server({
      accept_connection(),
      expect(0, "hello", kHello),
      hang_up(0),
      accept_connection(),
      expect(1, "1.x's CHECK of no keys: CHECK=4, count 0", "04 " + u64(0)),
      reply(1, "00"),
      expect(1, "set(k, v): SET=0", "00 " + str("/k") + str("v")),
      expect(1, "add(n, -2): ADD=3, key, int64", "03 " + str("/n") + "feffffffffffffff"),
      reply(1, u64(7)),
      expect(1, "compare_set(k, v, w): COMPARE_SET=1", "01 " + str("/k") + str("v") + str("w")),
      reply(1, str("w")),
      expect(1, "check({k}): CHECK=4", "04 " + u64(1) + str("/k")),
      reply(1, "01"),  // NOT_READY
      expect(1, "get(k) waits first: WAIT=5", "05 " + u64(1) + str("/k")),
      reply(1, "00"),
      expect(1, "get(k): GET=2", "02 " + str("/k")),
      reply(1, str("w")),
      expect(1, "delete_key(k): DELETE_KEY=8", "08 " + str("/k")),
      reply(1, u64(0)),
      expect(1, "num_keys(): GETNUMKEYS=6", "06"),
      reply(1, u64(2)),
      // 1.x has no MULTI_SET or MULTI_GET: a SET per key, then a WAIT and a GET per key.
      expect(1, "multi_set({a, b}): SET=0 per key", "00 " + str("/a") + str("1") + "00 " + str("/b") + str("22")),
      expect(1, "multi_get({a, b}) waits first: WAIT=5", "05 " + u64(2) + str("/a") + str("/b")),
      reply(1, "00"),
      expect(1, "multi_get({a, b}): GET=2 of a", "02 " + str("/a")),
      reply(1, str("1")),
      expect(1, "multi_get({a, b}): GET=2 of b", "02 " + str("/b")),
      reply(1, str("22")),
  });
  {
    c10d_store::Client client(options(server.port()));
    CHECK(client.dialect() == c10d_wire::Dialect::torch1);
    client.set("k", to_bytes("v"));
    CHECK(client.add("n", -2) == 7);
    CHECK(to_string(client.compare_set("k", to_bytes("v"), to_bytes("w"))) == "w");
    CHECK_FALSE(client.check({"k"}));
    CHECK(to_string(client.get("k", 1s)) == "w");
    CHECK_FALSE(client.delete_key("k"));
    CHECK(client.num_keys() == 2);
    multi_set_then_get(client);
  }
  check_all(server);
}

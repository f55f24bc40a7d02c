// The tcp:// store server: one Asio io_context driven by one thread (see server.h for the
// threading contract). Per connection: read whatever arrived, split it into frames
// (FrameReader), decode each (decode_request), apply it to the table and queue the reply.
// Blocking waits are parked in waiter lists and answered when a set/add/compare_set creates the
// last missing key; the client enforces its own timeout with cancel_wait, so the server never
// polls and never sleeps.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
// Asio uses std::atomic_thread_fence, which GCC's TSan warns about (-Wtsan) in the sanitizer
// build. The fences guard Asio's own cross-thread hand-offs; this server runs its io_context
// on one thread, so there is nothing for TSan to miss here.
#pragma GCC diagnostic ignored "-Wtsan"
#endif
#include "fastrun/runtime/store/tcp/server.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <atomic>
#include <deque>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/log/log.h"
#include "fastrun/runtime/os/unique_fd.h"
#include "fastrun/runtime/store/tcp/table.h"

namespace fastrun::tcp_store {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using tcp_wire::Op;
using tcp_wire::Request;
using tcp_wire::Status;

namespace {

// Stop reading from a client whose unsent replies exceed this; resume once they drain. Our
// client never has more than one request in flight, so only a misbehaving one gets here.
constexpr std::size_t kOutputHighWater = 8u << 20;

// Token comparison whose time depends only on the length of the expected token.
bool tokens_equal(const std::string& expected, const std::string& given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(static_cast<unsigned char>(expected[i]) ^ g);
  }
  return diff == 0;
}

std::string endpoint_text(const tcp::endpoint& ep) {
  const auto addr = ep.address();
  if (addr.is_v6()) return fmt::format("[{}]:{}", addr.to_string(), ep.port());
  return fmt::format("{}:{}", addr.to_string(), ep.port());
}

}  // namespace

class Connection;

struct Server::Impl {
  // Declared first so it is destroyed last: pending handlers own connections and their sockets.
  asio::io_context io;
  ServerOptions options;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::string address;  // "tcp://host:port" for log lines
  std::uint16_t bound_port = 0;

  Table table;
  std::unordered_map<std::string, std::vector<std::shared_ptr<Connection>>> waiters;
  // Connections parked in an arrive, by key, until its last participant arrives.
  std::unordered_map<std::string, std::vector<std::shared_ptr<Connection>>> arrivals;
  std::unordered_set<std::shared_ptr<Connection>> live;

  std::atomic<std::uint64_t> n_open{0}, n_peak{0}, n_accepted{0}, n_dropped{0}, n_auth_failures{0};
  std::thread thread;
  // One read buffer for every connection: the one server thread reads a ready socket into it and
  // hands the bytes to that connection's FrameReader at once, so an idle connection (above all
  // one that never authenticates) holds no buffer of its own.
  std::array<std::uint8_t, 64 * 1024> read_buffer{};

  explicit Impl(ServerOptions o) : options(std::move(o)) {}
  void listen();
  void accept();
  void run();
  void shutdown();

  void handle(const std::shared_ptr<Connection>& c, Request& r);
  void key_created(const std::string& key);
  void arrive(const std::shared_ptr<Connection>& c, const Request& r);
  void remove_waiter(const std::shared_ptr<Connection>& c);
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl& server, tcp::socket socket)
      : server_(server), socket_(std::move(socket)), handshake_timer_(server.io),
        reader_(server.options.limits.max_hello_frame()) {
    error_code ec;
    const auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("unknown peer") : endpoint_text(ep);
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec);
  }

  void start() {
    handshake_timer_.expires_after(server_.options.handshake_timeout);
    handshake_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec && !self->authenticated_)
        self->drop(fmt::format("did not authenticate within {} ms",
                               self->server_.options.handshake_timeout.count()));
    });
    read();
  }

  const std::string& peer() const { return peer_; }
  bool closed() const { return closed_; }
  bool authenticated() const { return authenticated_; }

  // Wait bookkeeping (server thread only): keys this connection still waits for.
  bool waiting = false;
  std::size_t wait_remaining = 0;
  std::vector<std::string> wait_keys;  // the keys registered in Impl::waiters
  std::string arrive_key;              // registered in Impl::arrivals (an arrive is parked)

  void send(tcp_wire::Bytes frame) {
    if (closed_) return;
    out_bytes_ += frame.size();
    out_.push_back(std::move(frame));
    if (!writing_) write_next();
  }

  // Sends `frame` (if any), then closes once it is written: used for auth failures and
  // protocol errors so the client learns why it was dropped.
  void send_and_close(tcp_wire::Bytes frame) {
    send(std::move(frame));
    close_after_write_ = true;
    paused_ = true;  // read nothing more from this client
  }

  void mark_authenticated() {
    authenticated_ = true;
    handshake_timer_.cancel();
    reader_.set_max_frame(server_.options.limits.max_frame());
  }

  // Logs why, counts it, closes. For clients that misbehave or vanish mid-conversation.
  void drop(const std::string& why) {
    if (closed_) return;
    if (close_after_write_) return close();  // already logged and counted when it was rejected
    fastrun::log::error("tcp store {}: dropping client {}: {}", server_.address, peer_, why);
    server_.n_dropped.fetch_add(1, std::memory_order_relaxed);
    close();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    auto self = shared_from_this();
    server_.remove_waiter(self);
    error_code ec;
    handshake_timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    server_.live.erase(self);
    server_.n_open.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  // Waits until the socket is readable, then reads what is there into the server's buffer.
  void read() {
    if (closed_ || paused_ || reading_) return;
    reading_ = true;
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      self->reading_ = false;
      if (ec) return self->on_read(ec, 0);
      self->read_ready();
    });
  }

  void read_ready() {
    if (closed_) return;
    error_code ec;
    const std::size_t n = socket_.read_some(asio::buffer(server_.read_buffer), ec);  // non-blocking socket
    if (ec == asio::error::would_block || ec == asio::error::try_again) return read();
    on_read(ec, n);
  }

  void on_read(error_code ec, std::size_t n) {
    if (closed_) return;
    if (ec) {
      if (ec == asio::error::eof && !reader_.mid_frame()) {
        if (waiting) fastrun::log::info("tcp store {}: client {} left while waiting", server_.address, peer_);
        fastrun::log::debug("tcp store {}: client {} disconnected", server_.address, peer_);
        close();
      } else if (ec == asio::error::eof) {
        drop("disconnected in the middle of a message (truncated frame)");
      } else {
        drop(fmt::format("connection error: {}", ec.message()));
      }
      return;
    }
    auto self = shared_from_this();
    const auto err = reader_.feed(server_.read_buffer.data(), n, [&](const std::uint8_t* body, std::size_t size) {
      auto decoded = tcp_wire::decode_request(body, size, server_.options.limits);
      if (auto* bad = std::get_if<tcp_wire::DecodeError>(&decoded)) {
        if (!authenticated_) {
          reject_auth(fmt::format("bad handshake: {}", bad->message));
        } else {
          fastrun::log::error("tcp store {}: dropping client {}: malformed request: {}", server_.address, peer_,
                              bad->message);
          server_.n_dropped.fetch_add(1, std::memory_order_relaxed);
          send_and_close(tcp_wire::encode_error_reply("malformed request: " + bad->message));
        }
        return false;
      }
      server_.handle(self, std::get<Request>(decoded));
      return !closed_ && !close_after_write_;
    });
    if (err) {
      if (!authenticated_) {
        reject_auth(err->message);
      } else {
        fastrun::log::error("tcp store {}: dropping client {}: {}", server_.address, peer_, err->message);
        server_.n_dropped.fetch_add(1, std::memory_order_relaxed);
        send_and_close(tcp_wire::encode_error_reply(err->message));
      }
      return;
    }
    if (out_bytes_ > kOutputHighWater) paused_ = true;
    read();
  }

 public:
  void reject_auth(const std::string& why) {
    fastrun::log::error("tcp store {}: rejected client {}: authentication failed ({})", server_.address, peer_, why);
    server_.n_dropped.fetch_add(1, std::memory_order_relaxed);
    server_.n_auth_failures.fetch_add(1, std::memory_order_relaxed);
    send_and_close(tcp_wire::encode_status(Status::auth_failed));
  }

 private:
  void write_next() {
    if (out_.empty()) {
      writing_ = false;
      if (close_after_write_) {
        close();
        return;
      }
      if (paused_ && out_bytes_ <= kOutputHighWater / 2) {
        paused_ = false;
        read();
      }
      return;
    }
    writing_ = true;
    asio::async_write(socket_, asio::buffer(out_.front()), [self = shared_from_this()](error_code ec, std::size_t) {
      if (self->closed_) return;
      if (ec) {
        self->drop(fmt::format("write failed: {}", ec.message()));
        return;
      }
      self->out_bytes_ -= self->out_.front().size();
      self->out_.pop_front();
      self->write_next();
    });
  }

  Server::Impl& server_;
  tcp::socket socket_;
  asio::steady_timer handshake_timer_;
  tcp_wire::FrameReader reader_;
  std::string peer_;
  std::deque<tcp_wire::Bytes> out_;
  std::size_t out_bytes_ = 0;
  bool writing_ = false;
  bool reading_ = false;
  bool paused_ = false;
  bool close_after_write_ = false;
  bool authenticated_ = false;
  bool closed_ = false;
};

void Server::Impl::handle(const std::shared_ptr<Connection>& c, Request& r) {
  if (!c->authenticated()) {
    if (r.op != Op::hello) return c->reject_auth(fmt::format("sent '{}' before authenticating", op_name(r.op)));
    if (!tokens_equal(options.token, r.token)) return c->reject_auth("wrong or missing token");
    c->mark_authenticated();
    return c->send(tcp_wire::encode_status(Status::ok));
  }
  if (c->waiting && r.op != Op::cancel_wait)
    return c->drop(fmt::format("sent '{}' while its wait is pending", op_name(r.op)));
  switch (r.op) {
    case Op::hello:
      return c->drop("sent a second hello");
    case Op::set: {
      const bool created = table.set(r.key, std::move(r.value));
      c->send(tcp_wire::encode_status(Status::ok));
      if (created) key_created(r.key);
      return;
    }
    case Op::get: {
      const auto* v = table.find(r.key);
      return c->send(v ? tcp_wire::encode_value_reply(*v) : tcp_wire::encode_status(Status::not_found));
    }
    case Op::add: {
      auto res = table.add(r.key, r.delta);
      if (!res.error.empty()) return c->send(tcp_wire::encode_error_reply(res.error));
      c->send(tcp_wire::encode_integer_reply(res.value));
      if (res.created) key_created(r.key);
      return;
    }
    case Op::compare_set: {
      auto res = table.compare_set(r.key, r.value, std::move(r.desired));
      c->send(tcp_wire::encode_value_reply(res.value));
      if (res.created) key_created(r.key);
      return;
    }
    case Op::wait: {
      std::size_t missing = 0;
      for (const auto& k : r.keys) {
        if (table.contains(k)) continue;
        waiters[k].push_back(c);
        c->wait_keys.push_back(k);
        ++missing;
      }
      if (missing == 0) return c->send(tcp_wire::encode_status(Status::ready));
      c->waiting = true;
      c->wait_remaining = missing;
      return;
    }
    case Op::arrive:
      return arrive(c, r);
    case Op::cancel_wait:
      // Either the wait is still parked (unpark it) or `ready` already went out and crossed
      // this request on the wire; the client reads up to `canceled` in both cases.
      remove_waiter(c);
      return c->send(tcp_wire::encode_status(Status::canceled));
    case Op::check: {
      tcp_wire::Reply reply;
      reply.status = Status::flags;
      reply.flags.reserve(r.keys.size());
      for (const auto& k : r.keys) reply.flags.push_back(table.contains(k));
      return c->send(tcp_wire::encode_reply(reply));
    }
    case Op::delete_key:
      return c->send(tcp_wire::encode_integer_reply(table.erase(r.key) ? 1 : 0));
    case Op::num_keys:
      return c->send(tcp_wire::encode_integer_reply(table.size()));
  }
}

void Server::Impl::key_created(const std::string& key) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  auto list = std::move(it->second);
  waiters.erase(it);
  for (auto& c : list) {
    if (c->closed() || !c->waiting) continue;
    if (--c->wait_remaining == 0) {
      c->waiting = false;
      c->wait_keys.clear();
      c->send(tcp_wire::encode_status(Status::ready));
    }
  }
}

// One request per participant: the last arrival answers every parked one at once, so a round
// of N costs N requests and N replies (add + wait on a release key costs 2N of each).
void Server::Impl::arrive(const std::shared_ptr<Connection>& c, const Request& r) {
  auto res = table.arrive(r.key, r.rank, r.participants);
  if (!res.error.empty()) return c->send(tcp_wire::encode_error_reply(res.error));
  if (res.arrived < r.participants) {
    arrivals[r.key].push_back(c);
    c->waiting = true;
    c->arrive_key = r.key;
  } else {
    c->send(tcp_wire::encode_status(Status::ready));
    if (auto it = arrivals.find(r.key); it != arrivals.end()) {
      auto list = std::move(it->second);
      arrivals.erase(it);
      for (auto& w : list) {
        if (w->closed() || !w->waiting) continue;
        w->waiting = false;
        w->arrive_key.clear();
        w->send(tcp_wire::encode_status(Status::ready));
      }
    }
  }
  if (res.created) key_created(r.key);
}

void Server::Impl::remove_waiter(const std::shared_ptr<Connection>& c) {
  if (!c->arrive_key.empty()) {
    if (auto it = arrivals.find(c->arrive_key); it != arrivals.end()) {
      auto& list = it->second;
      list.erase(std::remove(list.begin(), list.end(), c), list.end());
      if (list.empty()) arrivals.erase(it);
    }
    c->arrive_key.clear();
  }
  for (const auto& k : c->wait_keys) {
    auto it = waiters.find(k);
    if (it == waiters.end()) continue;
    auto& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), c), list.end());
    if (list.empty()) waiters.erase(it);
  }
  c->wait_keys.clear();
  c->waiting = false;
  c->wait_remaining = 0;
}

void Server::Impl::listen() {
  error_code ec;
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(options.host, std::to_string(options.port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  // A host or port the caller cannot have is its input's fault, a ConfigError stating the fact in
  // the address's own terms; the caller words the remedy in its own (a flag, a URL, a variable).
  if (ec || results.empty())
    throw ConfigError(fmt::format("tcp store: cannot listen on '{}': the host does not resolve ({})", options.host,
                                  ec ? ec.message() : "no addresses"));
  const tcp::endpoint ep = results.begin()->endpoint();
  const auto fail = [&](const char* step) {
    if (ec.value() == EADDRNOTAVAIL)
      throw ConfigError(fmt::format("tcp store: cannot listen on {}: {} is not an address of this host ({})",
                                    endpoint_text(ep), ep.address().to_string(), ec.message()));
    if (ec.value() == EADDRINUSE)
      throw ConfigError(fmt::format("tcp store: cannot listen on {}: port {} is in use on this host ({})",
                                    endpoint_text(ep), ep.port(), ec.message()));
    if (ec.value() == EACCES)
      throw ConfigError(fmt::format("tcp store: cannot listen on {}: port {} needs privileges this process lacks ({})",
                                    endpoint_text(ep), ep.port(), ec.message()));
    throw StoreError(fmt::format("tcp store: cannot listen on {}: {} failed: {}", endpoint_text(ep), step,
                                 ec.message()));
  };
  // Close-on-exec from birth: the host's children (ranks) must not inherit the listener and keep
  // the job's port bound after the job (asio's open() and accept() do not set it).
  os::UniqueFd fd(::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    ec.assign(errno, asio::error::get_system_category());
    fail("socket");
  }
  if (acceptor.assign(ep.protocol(), fd.get(), ec)) fail("socket");
  fd.release();  // the acceptor owns it now
  if (acceptor.non_blocking(true, ec)) fail("fcntl(O_NONBLOCK)");
  if (acceptor.set_option(tcp::acceptor::reuse_address(true), ec)) fail("setsockopt(SO_REUSEADDR)");
  if (acceptor.bind(ep, ec)) fail("bind");
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec)) fail("listen");
  bound_port = acceptor.local_endpoint(ec).port();
  if (ec) fail("getsockname");
  const std::string host = ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string();
  address = fmt::format("tcp://{}:{}", host, bound_port);
}

void Server::Impl::accept() {
  // accept4 with SOCK_CLOEXEC once the listener is readable (see listen()).
  acceptor.async_wait(tcp::acceptor::wait_read, [this](error_code ec) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    int fd = -1;
    if (!ec) {
      fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED))
        return accept();  // the client left before we took it
      if (fd < 0) ec.assign(errno, asio::error::get_system_category());
    }
    if (ec) {
      // Out of descriptors (EMFILE/ENFILE) or a transient error: say so and retry shortly
      // rather than spinning on a listen queue we cannot drain.
      fastrun::log::error("tcp store {}: accept failed: {}; retrying in 100 ms (raise `ulimit -n`?)", address,
                          ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(100));
      accept_retry.async_wait([this](error_code e) {
        if (!e) accept();
      });
      return;
    }
    tcp::socket socket(io);
    os::UniqueFd owner(fd);
    if (socket.assign(acceptor.local_endpoint(ec).protocol(), fd, ec)) return accept();
    owner.release();  // the asio socket owns it now
    auto c = std::make_shared<Connection>(*this, std::move(socket));
    live.insert(c);
    n_accepted.fetch_add(1, std::memory_order_relaxed);
    const auto open = n_open.fetch_add(1, std::memory_order_relaxed) + 1;
    if (open > n_peak.load(std::memory_order_relaxed)) n_peak.store(open, std::memory_order_relaxed);
    c->start();
    accept();
  });
}

void Server::Impl::run() {
  // Handlers do not throw by design; should one (bad_alloc on a huge value, ...), log it and
  // keep serving: io_context::run() may be resumed after an exception escapes a handler.
  for (;;) {
    try {
      io.run();
      return;  // stopped by shutdown()
    } catch (const std::exception& e) {
      try {
        fastrun::log::error("tcp store {}: a handler failed: {}; still serving", address, e.what());
      } catch (...) {
      }
    }
  }
}

void Server::Impl::shutdown() {
  io.stop();
  if (thread.joinable()) thread.join();
  // The thread is gone: this thread owns the state now. Close sockets while the io_context
  // still exists.
  error_code ec;
  acceptor.close(ec);
  accept_retry.cancel();
  waiters.clear();
  arrivals.clear();
  for (const auto& c : std::vector<std::shared_ptr<Connection>>(live.begin(), live.end())) c->close();
  live.clear();
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  if (impl_->options.token.empty()) throw StoreError("tcp store: the server needs a non-empty token");
  raise_fd_limit();
  impl_->listen();
  impl_->accept();
  fastrun::log::debug("tcp store {}: listening", impl_->address);  // before the thread: may throw
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

Server::~Server() {
  try {
    impl_->shutdown();
  } catch (...) {
    // Destructors never throw; closing sockets does not fail in practice.
  }
}

std::uint16_t Server::port() const { return impl_->bound_port; }
const std::string& Server::host() const { return impl_->options.host; }

ServerStats Server::stats() const {
  ServerStats s;
  s.connections = impl_->n_open.load(std::memory_order_relaxed);
  s.peak_connections = impl_->n_peak.load(std::memory_order_relaxed);
  s.accepted = impl_->n_accepted.load(std::memory_order_relaxed);
  s.dropped = impl_->n_dropped.load(std::memory_order_relaxed);
  s.auth_failures = impl_->n_auth_failures.load(std::memory_order_relaxed);
  return s;
}

std::uint64_t raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    const rlim_t before = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) {
      fastrun::log::debug("tcp store: raised the open-file limit from {} to {}", before, lim.rlim_cur);
    } else {
      lim.rlim_cur = before;
    }
  }
  return lim.rlim_cur;
}

}  // namespace fastrun::tcp_store

#pragma once
// The HostedStore of the tcp:// kind: owns the Server (listening from construction on; stopped
// and joined, never throwing, on destruction) and the job's token.
#include <cstdint>
#include <memory>
#include <string>

#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/tcp/server.h"

namespace fastrun::tcp_store {

class HostedTcpStore final : public HostedStore {
 public:
  // host "" = 127.0.0.1; port 0 = pick a free one. The token is options.token, else
  // FASTRUN_STORE_TOKEN, else a fresh random one (see token()).
  HostedTcpStore(const std::string& host, std::uint16_t port, const StoreOptions& options,
                 const tcp_wire::Limits& limits = {});
  ~HostedTcpStore() override;

  std::string address() const override;
  std::string token() const override { return token_; }
  std::unique_ptr<Store> connect() override;

  std::uint16_t port() const;
  ServerStats stats() const;

 private:
  StoreOptions options_;
  std::string token_;
  std::string connect_host_;
  std::string publish_host_;
  std::unique_ptr<Server> server_;
};

// 32 bytes from /dev/urandom as 64 hex digits.
std::string random_token();

}  // namespace fastrun::tcp_store

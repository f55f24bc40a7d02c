// The registry of conformance.h and the kinds this folder owns: memory, prefix, shm, file.
#include <dirent.h>
#include <unistd.h>

#include <atomic>

#include <fmt/format.h>

#include "conformance.h"
#include "fastrun/runtime/store/memory_store.h"
#include "fastrun/runtime/store/prefix_store.h"
#include "fastrun/runtime/store/runtime_dir.h"
#include "fastrun/tools/store_host/store_in_child_process.h"

namespace fastrun::test {

std::vector<StoreKindCase>& store_kinds_under_test() {
  static std::vector<StoreKindCase> kinds;
  return kinds;
}

std::unique_ptr<Store> connect_to(const HostedStore& hosted, Duration timeout) {
  StoreOptions o;
  o.timeout = timeout;
  o.token = hosted.token();
  return connect_store(hosted.address(), o);
}

std::unique_ptr<HostedStore> host_for_forks(const StoreKindCase& kind) {
  if (!kind.server_thread) return kind.host();
  return std::make_unique<tools::StoreInChildProcess>(kind.host, std::chrono::seconds(20));
}

std::string test_name_prefix() { return fmt::format("t{}-", ::getpid()); }

std::string unique_test_name(std::string_view tag) {
  static std::atomic<int> counter{0};
  return fmt::format("{}{}-{}", test_name_prefix(), counter.fetch_add(1), tag);
}

std::vector<std::string> leftovers() {
  std::vector<std::string> found;
  const std::string prefix = test_name_prefix();
  auto scan = [&](const std::string& dir, const std::string& name_prefix) {
    if (DIR* d = ::opendir(dir.c_str())) {
      while (const dirent* e = ::readdir(d))
        if (std::string_view(e->d_name).substr(0, name_prefix.size()) == name_prefix)
          found.push_back(dir + "/" + e->d_name);
      ::closedir(d);
    }
  };
  scan("/dev/shm", "fastrun-" + prefix);
  scan(runtime_dir(), prefix);
  return found;
}

namespace {

class HostedMemory final : public HostedStore {
 public:
  std::string address() const override { return "memory://"; }
  std::string token() const override { return ""; }
  std::unique_ptr<Store> connect() override { return store_.clone(); }

 private:
  MemoryStore store_;
};

// A prefix store over a shm store: every handle sees keys under "job-7/".
class HostedPrefix final : public HostedStore {
 public:
  HostedPrefix() : inner_(host_store("shm://" + unique_test_name("prefix"))) {}
  std::string address() const override { return inner_->address(); }
  std::string token() const override { return ""; }
  std::unique_ptr<Store> connect() override { return std::make_unique<PrefixStore>("job-7", inner_->connect()); }

 private:
  std::unique_ptr<HostedStore> inner_;
};

StoreOptions test_options() {
  StoreOptions o;
  o.timeout = std::chrono::seconds(20);
  return o;
}

const RegisterStoreKind memory_kind{{"memory", [] { return std::unique_ptr<HostedStore>(new HostedMemory); }, false}};
const RegisterStoreKind prefix_kind{{"prefix", [] { return std::unique_ptr<HostedStore>(new HostedPrefix); }, false}};
const RegisterStoreKind shm_kind{{"shm", [] { return host_store("shm://" + unique_test_name("shm"), test_options()); }}};
const RegisterStoreKind file_kind{{"file", [] { return host_store("file://" + unique_test_name("file"), test_options()); }}};

}  // namespace
}  // namespace fastrun::test

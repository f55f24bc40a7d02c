#pragma once
// The store conformance suite's registry of store kinds. Every kind registered here runs the
// whole suite: the single-process contract cases (conformance_test.cpp) and, when
// `cross_process` is set, the real-process cases (multiprocess_test.cpp: kill-mid-operation loop,
// 256-process rendezvous, waiters in other processes).
//
// A kind registers itself from its own test source, once, at static-initialization time:
//
//   static fastrun::test::RegisterStoreKind tcp_kind{{
//       "tcp", [] { return fastrun::host_store("tcp://127.0.0.1:0"); }}};
//
// Contract for `host`: each call hosts a FRESH, empty store (unique name/path/port) and the
// returned HostedStore removes everything it created when destroyed. Children (fork) reach it
// with connect_store(hosted->address(), {.token = hosted->token()}) — see connect_to().
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/store.h"

namespace fastrun::test {

struct StoreKindCase {
  std::string name;  // "memory", "prefix", "shm", "file", "tcp"
  std::function<std::unique_ptr<HostedStore>()> host;
  // True when another process can connect through connect_store(address()).
  bool cross_process = true;
  // The largest value the store takes (the "16 MiB values" case sets one this big when smaller):
  // torch 2.x's libuv c10d server refuses more than 8 MiB.
  std::size_t max_value_bytes = std::size_t{16} << 20;
  // `host` starts a server thread in this process (tcp://). The real-process cases fork clients,
  // so they host such a kind in a child process instead (host_for_forks).
  bool server_thread = false;
};

// Every registered kind, in registration order (one translation unit registers memory, prefix,
// shm and file; others may add theirs).
std::vector<StoreKindCase>& store_kinds_under_test();

struct RegisterStoreKind {
  explicit RegisterStoreKind(StoreKindCase kind) { store_kinds_under_test().push_back(std::move(kind)); }
};

// `kind` hosted for cases that fork clients: in a child process when it has a server thread
// (tools/store_host/store_in_child_process.h: GCC 12's ASan allocator is not fork-safe), else
// here as `host` does.
std::unique_ptr<HostedStore> host_for_forks(const StoreKindCase& kind);

// A client handle on `hosted` for this process or a forked child (carries the token).
std::unique_ptr<Store> connect_to(const HostedStore& hosted, Duration timeout = std::chrono::seconds(20));

// A name no other test (or concurrent run of the suite) uses: "t<pid>-<counter>-<tag>".
// Its prefix test_name_prefix() lets a test assert that nothing it made is left behind.
std::string unique_test_name(std::string_view tag);
std::string test_name_prefix();

// What this test process created and left behind: /dev/shm/fastrun-<prefix>* segments and
// <runtime dir>/<prefix>* entries. Tests assert it is empty once their stores are gone.
std::vector<std::string> leftovers();

}  // namespace fastrun::test

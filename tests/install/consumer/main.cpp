// Uses the installed headers and libraries the way a user's program would.
#include <cstdio>

#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/store/store.h"

int main() {
  // A world of one: no FASTRUN_* variables set.
  auto rank = fastrun::env::find_int(fastrun::env::kRank).value_or(0);
  auto size = fastrun::env::find_int(fastrun::env::kWorldSize).value_or(1);
  std::printf("consumer: rank %lld of %lld, %zu samples\n", static_cast<long long>(rank),
              static_cast<long long>(size), fastrun::to_bytes("ab").size());
  return 0;
}

// completed_work() (process_group/async_work.h): the handle of an op that finished where it was
// called is one shared object behind a handle that owns nothing, so that handing it out costs no
// allocation and no reference count. What holds and what a caller may rely on.
#include <catch2/catch.hpp>

#include <memory>
#include <thread>
#include <vector>

#include "fastrun/runtime/process_group/async_work.h"

using namespace fastrun;

TEST_CASE("completed_work: one finished op behind a handle that owns nothing", "[work]") {
  const WorkHandle a = completed_work();
  const WorkHandle b = completed_work();
  REQUIRE(a);  // non-null: callers test `if (work)` and call through it
  CHECK(a.get() == b.get());
  CHECK(a.use_count() == 0);  // no control block: copies and drops count nothing
  CHECK(a->completed());
  CHECK(a->known_complete());
  CHECK_NOTHROW(a->wait());
  // A copy, moved, dropped: the object stays (it lives until the process ends).
  {
    WorkHandle c = a;
    WorkHandle d = std::move(c);
    d.reset();
  }
  CHECK(b->completed());
  // Expired at once as a weak_ptr: it must not be handed to anything that watches a handle's
  // life (the flight record is given only ops still running; flight_record_test.cpp).
  CHECK(std::weak_ptr<Work>(a).expired());
}

TEST_CASE("completed_work: handed out and waited on by many threads at once", "[work]") {
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (std::size_t t = 0; t < ok.size(); ++t)
    threads.emplace_back([&ok, t] {
      for (int i = 0; i < 10000; ++i) {
        WorkHandle w = completed_work();
        w->wait();
        if (w->completed()) ++ok[t];
      }
    });
  for (auto& t : threads) t.join();
  for (int n : ok) CHECK(n == 10000);
}

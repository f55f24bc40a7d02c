// The comm thread (process_group/comm_thread.h): tasks run in the order posted, whether the
// thread or a waiter (runner()) runs them, and destruction runs what is still queued.
#include <catch2/catch.hpp>

#include <mutex>
#include <thread>
#include <vector>

#include "fastrun/runtime/process_group/comm_thread.h"

using namespace fastrun;

TEST_CASE("comm thread: tasks run in the order posted, also with waiters running some", "[comm_thread]") {
  std::vector<int> order;
  std::mutex m;
  {
    CommThread thread("test");
    for (int i = 0; i < 200; ++i) {
      const auto ticket = thread.post([&, i] {
        std::lock_guard lock(m);
        order.push_back(i);
      });
      if (i % 3 == 0) thread.runner(ticket)();
    }
  }  // destruction runs what is left
  REQUIRE(order.size() == 200);
  for (int i = 0; i < 200; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("comm thread: a waiter runs only the next task, and none while one runs", "[comm_thread]") {
  std::mutex gate;
  std::unique_lock hold(gate);  // the first task blocks on it: the thread is busy
  std::vector<int> order;
  std::mutex m;
  auto note = [&](int i) {
    std::lock_guard lock(m);
    order.push_back(i);
  };
  {
    CommThread thread("test");
    thread.post([&] {
      std::lock_guard wait_for_gate(gate);
      note(0);
    });
    const auto second = thread.post([&] { note(1); });
    // Queued behind the first, or behind the first running: not the waiter's to run either way.
    CHECK_FALSE(thread.runner(second)());
    hold.unlock();
    const auto third = thread.post([&] { note(2); });
    thread.runner(third)();  // runs it if it is next and nothing runs, else leaves it: in order either way
  }
  CHECK(order == std::vector<int>{0, 1, 2});
}

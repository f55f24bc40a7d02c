// The flight record (process_group/flight_recorder.h) with ranks as threads over an in-process
// store: the monitor threads answer for ranks whose own thread is busy elsewhere, the explanation
// names who did not reach the op, and it becomes the job's failure. Runs under TSan too.
#include <catch2/catch.hpp>

#include <thread>

#include <fmt/format.h>

#include "fastrun/runtime/error.h"
#include "fastrun/runtime/process_group/async_work.h"
#include "fastrun/runtime/process_group/flight_answer.h"
#include "fastrun/runtime/process_group/flight_monitor.h"
#include "fastrun/runtime/process_group/flight_recorder.h"
#include "fastrun/runtime/process_group/no_sync.h"
#include "fastrun/runtime/store/job_keys.h"
#include "fastrun/runtime/store/memory_store.h"
#include "test_support/scoped_env.h"

using namespace fastrun;

namespace {
OpDesc op(OpName name, std::int64_t seq) {
  float x = 0;
  OpDesc d = op_desc(name, view_of(&x, 1)).with_reduce(ReduceOp::sum);
  d.seq = seq;
  return d;
}
}  // namespace

TEST_CASE("flight record: a ring of the last ops with their states", "[group][flight]") {
  FlightRecorder rec("world", {0}, 0, nullptr);
  for (int i = 1; i <= 300; ++i) rec.end(rec.begin(op("all_reduce", i)), i % 2 == 0);
  const auto all = rec.entries();
  REQUIRE(all.size() == FlightRecorder::kCapacity);
  CHECK(all.front().op.seq == 300 - static_cast<std::int64_t>(FlightRecorder::kCapacity) + 1);
  CHECK(all.back().op.seq == 300);
  CHECK(all.back().state == FlightEntry::State::completed);
  CHECK(all[all.size() - 2].state == FlightEntry::State::failed);
  // An op whose handle is complete reads as completed before anyone waits on it.
  const auto slot = rec.begin(op("broadcast", 301));
  // The caller holds its handle (a counted one: completed_work()'s owns nothing, and Group
  // never attaches a finished op).
  const WorkHandle done = std::make_shared<CompletedWork>();
  rec.attach(slot, done);
  CHECK(rec.entries().back().state == FlightEntry::State::completed);
  CHECK(!rec.busy());
  rec.begin(op("barrier", 302));
  CHECK(rec.busy());
  CHECK_THAT(rec.state_line(), Catch::StartsWith("in op #302 barrier(float32 x 1, sum) for "));
}

TEST_CASE("flight record: the monitors answer for busy ranks and the timeout names them", "[group][flight]") {
  auto store = std::make_shared<MemoryStore>();
  // Three ranks as threads of this process, each with its own recorder (and so its own monitor).
  FlightRecorder r0("world", {0, 1, 2}, 0, store->clone());
  FlightRecorder r1("world", {0, 1, 2}, 1, store->clone());
  FlightRecorder r2("world", {0, 1, 2}, 2, store->clone());
  FlightRecorder other1("group-1", {1, 2}, 0, store->clone());
  for (FlightRecorder* r : {&r0, &r1, &r2}) r->end(r->begin(op("all_reduce", 1)), true);
  r0.begin(op("all_reduce", 2));
  r2.begin(op("all_reduce", 2));
  other1.begin(op("broadcast", 1));  // rank 1 is stuck in another group's op

  std::string text0, text2;
  std::thread t([&] { text2 = r2.explain_timeout(op("all_reduce", 2)); });
  text0 = r0.explain_timeout(op("all_reduce", 2));
  t.join();
  for (const std::string& text : {text0, text2}) {
    INFO(text);
    CHECK_THAT(text, Catch::Contains("op #2 all_reduce(float32 x 1, sum) on group 'world' timed out"));
    CHECK_THAT(text, Catch::Contains("rank 1 did not reach op #2"));
    CHECK_THAT(text, Catch::Contains("rank 1: last op #1 all_reduce(float32 x 1, sum) completed"));
    CHECK_THAT(text, Catch::Contains("on group 'group-1': in op #1 broadcast(float32 x 1, sum) for"));
    CHECK_THAT(text, Catch::Contains("rank 2: in op #2 all_reduce(float32 x 1, sum) for"));
  }
  // Computed once per group; the first explanation is the job's failure.
  CHECK(r0.explain_timeout(op("all_reduce", 2)) == text0);
  const std::string failure = to_string(store->get(kFailureKey, std::chrono::seconds(1)));
  CHECK((failure == "rank 0: " + text0 || failure == "rank 2: " + text2));
}

TEST_CASE("flight record: a rank whose monitor is gone is named as not answering", "[group][flight]") {
  auto store = std::make_shared<MemoryStore>();
  FlightRecorder r0("world", {0, 1}, 0, store->clone());
  r0.begin(op("all_reduce", 1));
  const auto start = std::chrono::steady_clock::now();
  const std::string text = r0.explain_timeout(op("all_reduce", 1));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK_THAT(text, Catch::Contains("rank 1 did not answer"));
  CHECK_THAT(text, Catch::Contains("rank 1: no answer within 1.5 s"));
}

// A rank that timed out first closes its groups on the way out while its monitor still answers
// (for another group, or until its thread stops): it reached the op, and must read so. Before,
// its answer lacked the closed group and the explanation said "ranks 1,2 did not reach op #2".
TEST_CASE("flight record: a rank that closed the group answers with its last state", "[group][flight]") {
  auto store = std::make_shared<MemoryStore>();
  FlightRecorder r0("world", {0, 1, 2}, 0, store->clone());
  FlightRecorder r1("world", {0, 1, 2}, 1, store->clone());
  auto r2 = std::make_unique<FlightRecorder>("world", std::vector<int>{0, 1, 2}, 2, store->clone());
  FlightRecorder still_open("group-1", {1, 2}, 1, store->clone());  // keeps rank 2's monitor running
  for (FlightRecorder* r : {&r0, &r1, r2.get()}) r->end(r->begin(op("all_reduce", 1)), true);
  r0.begin(op("all_reduce", 2));
  r2->end(r2->begin(op("all_reduce", 2)), false);  // rank 2 timed out first
  r2.reset();

  const std::string text = r0.explain_timeout(op("all_reduce", 2));
  INFO(text);
  CHECK_THAT(text, Catch::Contains(": rank 1 did not reach op #2."));
  CHECK_THAT(text, Catch::Contains("rank 2: closed the group "));
  CHECK_THAT(text, Catch::Contains(" s ago; before that: in op #2 all_reduce(float32 x 1, sum) for "));

  // A group of the same name made again answers for itself, not with the closed one's state.
  FlightRecorder again("world", {0, 1, 2}, 2, store->clone());
  const std::string dump = FlightMonitor::acquire(store, 2)->dump();
  CHECK_THAT(dump, Catch::Contains("world\t0\t0\tno op yet\n"));
  CHECK_THAT(dump, !Catch::Contains("closed the group"));
}

TEST_CASE("flight record: a monitor keeps the last state of the latest closed groups only", "[group][flight]") {
  auto store = std::make_shared<MemoryStore>();
  FlightRecorder world("world", {0, 1}, 0, store->clone());  // keeps rank 0's monitor running
  const std::size_t made = FlightMonitor::kMaxClosed + 4;
  for (std::size_t i = 0; i < made; ++i) {
    FlightRecorder g(fmt::format("group-{}", i), {0, 1}, 0, store->clone());
    g.end(g.begin(op("broadcast", 1)), true);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // distinct close times
  }
  const std::string dump = FlightMonitor::acquire(store, 0)->dump();
  INFO(dump);
  std::size_t closed = 0;
  for (auto at = dump.find("closed the group"); at != std::string::npos; at = dump.find("closed the group", at + 1))
    ++closed;
  CHECK(closed == FlightMonitor::kMaxClosed);
  CHECK_THAT(dump, Catch::Contains("world\t0\t0\tno op yet\n"));
  CHECK_THAT(dump, Catch::Contains(fmt::format("group-{}\t1\t0\tclosed the group", made - 1)));
  CHECK_THAT(dump, !Catch::Contains("group-0\t"));
  CHECK_THAT(dump, !Catch::Contains("group-3\t"));
}

TEST_CASE("flight record: an answer's lines read back as written, malformed ones skipped", "[group][flight]") {
  const std::string text = flight::answer_line("world", 7, true, "in op #7 all_reduce(float32 x 1, sum) for 2.0 s") +
                           "no tabs here\n" + "group-1\tseven\t0\tnot a number\n" +
                           flight::answer_line("group-2", 0, false, "no op yet");
  const auto groups = flight::parse_answer(text);
  REQUIRE(groups.size() == 2);
  CHECK(groups.at("world").last_seq == 7);
  CHECK(groups.at("world").busy);
  CHECK(groups.at("world").line == "in op #7 all_reduce(float32 x 1, sum) for 2.0 s");
  CHECK(groups.at("group-2").last_seq == 0);
  CHECK_FALSE(groups.at("group-2").busy);
  CHECK(groups.at("group-2").line == "no op yet");
}

TEST_CASE("FASTRUN_NO_SYNC is read once, and guards are seen by every thread", "[group][no_sync]") {
  const int before = no_sync_level();  // the environment's level, parsed now at the latest
  {
    test::ScopedEnv env("FASTRUN_NO_SYNC", before == 2 ? "1" : "2");
    CHECK(no_sync_level() == before);  // not parsed again
  }
  const int previous = exchange_no_sync_override(2);
  int seen = -1;
  std::thread([&] { seen = no_sync_level(); }).join();
  CHECK(seen == 2);
  exchange_no_sync_override(previous);
  CHECK(no_sync_level() == before);
}

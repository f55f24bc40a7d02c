#pragma once
// The sampler states pinned in tests/samplers/fixtures/: one case per sampler kind, each saved
// mid-epoch by the code of commit cc62d9c (the hand-written JSON writer and reader) and frozen
// there. `save` builds the sampler and advances it as it was when the fixture was written;
// `resume` builds a fresh sampler, loads a state into it and reads what comes next. The
// fixtures are old checkpoints: never regenerate them with newer code (that would pin nothing).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fastrun/samplers/samplers.h"

namespace fastrun::samplers::fixtures {

struct Resumed {
  std::string state_after_load;                    // state() right after load_state
  std::vector<std::vector<std::uint64_t>> rest;    // what the resumed sampler yields, one batch a row
};

struct Case {
  const char* name;  // the fixture's file stem
  std::function<std::string()> save;
  std::function<Resumed(const std::string& state)> resume;
};

inline std::vector<std::uint64_t> lengths_of(std::uint64_t n, std::uint64_t mult) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t i = 0; i < n; ++i) out.push_back(1 + (i * mult) % 37);
  return out;
}

// What an index sampler yields after the load: one row of all its remaining indices.
inline Resumed resume_index(ReproducibleSampler& s, const std::string& state, int replicas, int rank, bool pad) {
  s.load_state(state);
  Resumed r{s.state(), {}};
  s.set_distributed(replicas, rank, pad);
  r.rest.push_back(s.take_all());
  return r;
}

inline Resumed resume_batches(BatchSampler& s, const std::string& state, int replicas, int rank, bool pad) {
  s.load_state(state);
  Resumed r{s.state(), {}};
  if (replicas > 0) s.set_distributed(replicas, rank, pad);
  for (std::vector<std::uint64_t> b; s.next_batch(b);) r.rest.push_back(b);
  return r;
}

inline void advance(ReproducibleSampler& s, int k) {
  for (int i = 0; i < k; ++i) s.next();
}
inline void advance(BatchSampler& s, int k) {
  std::vector<std::uint64_t> b;
  for (int i = 0; i < k; ++i) s.next_batch(b);
}

// ReproduceBatchSampler's source: an epoch-dependent list that is not a function of any state
// field, so only the saved list can reproduce it.
inline std::vector<std::uint64_t> scrambled_list(std::uint64_t epoch) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t i = 0; i < 23; ++i) out.push_back((i * 7 + epoch * 5) % 23);
  return out;
}

inline std::vector<Case> cases() {
  return {
      {"random_sampler",
       [] {
         RandomSampler s(50, true, 42);
         s.set_epoch(3);
         s.set_distributed(4, 1, true);
         advance(s, 5);
         return s.state();
       },
       [](const std::string& st) {
         RandomSampler s(50);
         return resume_index(s, st, 3, 2, false);  // saved on 4 ranks, resumed on 3
       }},
      {"random_sampler_unshuffled",
       [] {
         RandomSampler s(20, false, 7);
         advance(s, 6);
         return s.state();
       },
       [](const std::string& st) {
         RandomSampler s(20, true, 1);  // the state's shuffle and seed win
         return resume_index(s, st, 1, 0, false);
       }},
      {"lazy_random_sampler",
       [] {
         LazyRandomSampler s(40, 9);
         s.set_epoch(1);
         s.set_distributed(2, 0, false);
         advance(s, 7);
         return s.state();
       },
       [](const std::string& st) {
         LazyRandomSampler s(40);
         return resume_index(s, st, 2, 1, false);
       }},
      {"sequential_sampler",
       [] {
         SequentialSampler s(17);
         advance(s, 3);
         return s.state();
       },
       [](const std::string& st) {
         SequentialSampler s(17);
         return resume_index(s, st, 2, 0, true);
       }},
      {"sorted_sampler",
       [] {
         SortedSampler s(lengths_of(25, 5));
         s.set_epoch(2);
         s.set_distributed(2, 1, true);
         advance(s, 4);
         return s.state();
       },
       [](const std::string& st) {
         SortedSampler s(lengths_of(25, 5));
         return resume_index(s, st, 2, 1, true);
       }},
      {"random_batch_sampler",
       [] {
         RandomBatchSampler s(30, 4, true, false, 5);
         s.set_epoch(1);
         s.set_distributed(2, 1, false);
         advance(s, 2);
         return s.state();
       },
       [](const std::string& st) {
         RandomBatchSampler s(30, 4);
         return resume_batches(s, st, 2, 1, false);
       }},
      {"bucketed_batch_sampler",
       [] {
         BucketedBatchSampler s(lengths_of(60, 11), 3, 2, true, false, 11);
         s.set_epoch(4);
         s.set_distributed(2, 0, true);
         advance(s, 3);
         s.set_distributed(3, 0, true);  // a second layout: the state's segments hold both
         advance(s, 1);
         return s.state();
       },
       [](const std::string& st) {
         BucketedBatchSampler s(lengths_of(60, 11), 3, 2);
         return resume_batches(s, st, 3, 2, true);
       }},
      {"reproduce_batch_sampler",
       [] {
         ReproduceBatchSampler s(scrambled_list, 5, false);
         s.set_epoch(2);
         advance(s, 2);
         return s.state();
       },
       [](const std::string& st) {
         // A source that yields another list: only the state's list can give the fixture's rest.
         ReproduceBatchSampler s([](std::uint64_t) { return std::vector<std::uint64_t>(23, 0); }, 5, false);
         return resume_batches(s, st, 0, 0, false);
       }},
  };
}

}  // namespace fastrun::samplers::fixtures

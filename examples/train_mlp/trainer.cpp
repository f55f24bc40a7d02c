// The training loop shared by train_mlp and train_mlp_cuda (trainer.h).
#include "trainer.h"

#include <cstdio>
#include <fstream>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "../common/kill_plan.h"
#include "../common/resume_path.h"
#include "checkpoint.h"
#include "fastrun/launcher/self_launch.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/objects/object_collectives.h"
#include "fastrun/samplers/random_sampler.h"

namespace train_mlp {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Checkpoint snapshot(const Model& m, const Options& opt, const fastrun::samplers::RandomSampler& s, std::uint64_t step,
                    std::uint64_t seed) {
  Checkpoint c;
  c.epoch = s.epoch();
  c.global_step = step;
  c.seed = seed;
  c.dim = opt.dim;
  c.hidden = opt.hidden;
  c.classes = opt.classes;
  c.sampler_state = s.state();
  c.values = m.values();
  return c;
}

int train(const Options& opt, const TrainerSpec& spec) {
  // 1. Join the job: rank, world size, store and the default process group.
  auto ctx = fastrun::join();
  const int R = ctx->world_size(), rank = ctx->rank();
  const std::int64_t attempt = fastrun::env::find_int(fastrun::env::kRestartCount).value_or(0);
  const auto kills = fastrun_examples::parse_kill_plan(opt.kill_at);
  auto& world = ctx->world();
  if (opt.global_batch % static_cast<std::uint64_t>(R) != 0 || (opt.global_batch / R) % opt.accum != 0)
    throw fastrun::ConfigError(fmt::format("--global-batch {} must be a multiple of the number of ranks ({}) times "
                                           "--accum ({})",
                                           opt.global_batch, R, opt.accum));
  const std::uint64_t b = opt.global_batch / static_cast<std::uint64_t>(R);  // per rank per step
  const std::uint64_t micro = b / opt.accum;

  // 2. Resume point (every rank reads it: the sampler position is needed everywhere).
  //    With --resume-latest, the last checkpoint when there is one: under fastrun --max-restarts
  //    every attempt goes on where the last one's rank 0 wrote it.
  const std::string resume = fastrun_examples::resume_path(opt);
  std::optional<Checkpoint> ck;
  if (!resume.empty()) ck = read_checkpoint(resume);
  std::uint64_t seed = opt.seed;
  if (ck) seed = ck->seed;
  else if (!opt.seed_given) seed = static_cast<std::uint64_t>(fastrun::env::find_int(fastrun::env::kGlobalSeed).value_or(1234));

  // 3. Data, model, sampler.
  const Dataset data = make_dataset(opt.samples, opt.dim, opt.classes, seed);
  Mlp init(opt.dim, opt.hidden, opt.classes, seed);
  const std::size_t num_values = init.num_values();
  std::unique_ptr<Model> model_ptr = spec.make_model(data, std::move(init));
  Model& model = *model_ptr;
  fastrun::samplers::RandomSampler sampler(opt.samples, /*shuffle=*/true, seed);
  sampler.set_distributed(R, rank, /*pad=*/false);
  std::uint64_t global_step = 0;
  if (ck) {
    if (ck->dim != opt.dim || ck->hidden != opt.hidden || ck->classes != opt.classes || ck->values.size() != num_values)
      throw fastrun::ConfigError(fmt::format("--resume {}: the checkpoint is for --dim {} --hidden {} --classes {}, this "
                                             "run has {} {} {}",
                                             resume, ck->dim, ck->hidden, ck->classes, opt.dim, opt.hidden, opt.classes));
    model.load_values(ck->values);
    sampler.load_state(ck->sampler_state);
    global_step = ck->global_step;
  }

  // 4. DDP over the four parameter buffers (checks the layout, broadcasts rank 0's values).
  std::vector<fastrun::DdpParameter> params = model.ddp_parameters();
  fastrun::DdpOptions ddp_options;
  if (opt.bucket_kb) ddp_options.bucket_bytes = opt.bucket_kb << 10;
  if (opt.first_bucket_kb) ddp_options.first_bucket_bytes = opt.first_bucket_kb << 10;
  fastrun::DistributedDataParallel ddp(world, params, ddp_options);

  std::ofstream index_log;
  if (!opt.log_indices.empty()) {
    index_log.open(fmt::format("{}/indices.rank{}.txt", opt.log_indices, rank), std::ios::app);
    if (!index_log) throw fastrun::ConfigError(fmt::format("--log-indices {}: cannot open a file there", opt.log_indices));
  }
  const bool talk = rank == 0 && !opt.quiet;
  if (talk) {
    std::printf("%s: %d rank(s) on %s, %llu samples, global batch %llu (%llu per rank), %zu parameters in %zu "
                "bucket(s)%s\n",
                spec.program, R, world.backend_name().c_str(), static_cast<unsigned long long>(opt.samples),
                static_cast<unsigned long long>(opt.global_batch), static_cast<unsigned long long>(b),
                num_values, ddp.buckets().size(),
                ck ? fmt::format("; resumed from {} at epoch {}, step {}", resume, ck->epoch, ck->global_step).c_str()
                   : "");
    std::fflush(stdout);
  }

  // 5. Train.
  const auto t_start = Clock::now();
  double last_loss = 0;
  std::vector<std::uint64_t> batch(b), mb(micro);
  for (std::uint64_t epoch = sampler.epoch(); epoch < opt.epochs; ++epoch) {
    sampler.set_epoch(epoch);  // the restored epoch keeps its position
    const std::uint64_t steps = sampler.num_left() / b;
    const auto t_epoch = Clock::now();
    double loss_sum = 0;
    std::uint64_t correct = 0, seen = 0;
    for (std::uint64_t s = 0; s < steps; ++s) {
      fastrun_examples::kill_if_planned(kills, global_step, rank, attempt);  // test hook (--kill-at)
      sampler.next_into(batch.data(), b);
      if (index_log.is_open()) {
        index_log << epoch << ' ' << global_step;
        for (auto i : batch) index_log << ' ' << i;
        index_log << '\n' << std::flush;
      }
      model.zero_grad();
      for (std::uint64_t m = 0; m < opt.accum; ++m) {
        std::copy(batch.begin() + static_cast<long>(m * micro), batch.begin() + static_cast<long>((m + 1) * micro), mb.begin());
        auto ready = [&](std::size_t k) { ddp.mark_ready(k); };
        BatchResult r;
        if (m + 1 < opt.accum) {  // accumulate locally: no communication
          auto guard = ddp.no_sync();
          r = model.forward_backward(mb, 1.0 / static_cast<double>(b), ready);
        } else {
          r = model.forward_backward(mb, 1.0 / static_cast<double>(b), ready);
          ddp.finish();  // gradients now averaged over all ranks
        }
        loss_sum += r.loss_sum;
        correct += r.correct;
      }
      seen += b;
      model.sgd_step(static_cast<float>(opt.lr));
      ++global_step;
      if (rank == 0 && !opt.checkpoint.empty() && opt.checkpoint_every && global_step % opt.checkpoint_every == 0)
        write_checkpoint_atomic(opt.checkpoint, snapshot(model, opt, sampler, global_step, seed));
    }
    if (steps == 0) continue;  // resumed at the very end of an epoch
    // Metrics: every rank's (loss sum, samples, correct, seconds), gathered on rank 0.
    auto all = fastrun::gather_object(std::make_tuple(loss_sum, seen, correct, seconds_since(t_epoch)), 0, &world);
    if (all) {
      double l = 0, secs = 0;
      std::uint64_t n = 0, c = 0;
      for (auto& [li, ni, ci, si] : *all) l += li, n += ni, c += ci, secs = std::max(secs, si);
      last_loss = l / static_cast<double>(n);
      if (talk) {
        std::printf("epoch %llu/%llu  step %llu  loss %.4f  acc %.3f  %.0f samples/s\n",
                    static_cast<unsigned long long>(epoch + 1), static_cast<unsigned long long>(opt.epochs),
                    static_cast<unsigned long long>(global_step), last_loss, static_cast<double>(c) / n, n / secs);
        std::fflush(stdout);
      }
    }
    if (rank == 0 && !opt.checkpoint.empty())
      write_checkpoint_atomic(opt.checkpoint, snapshot(model, opt, sampler, global_step, seed));
  }
  if (rank == 0 && !opt.weights_out.empty())
    write_checkpoint_atomic(opt.weights_out, snapshot(model, opt, sampler, global_step, seed));
  if (talk) {
    std::printf("%s: done: %llu steps in %.2f s on %d rank(s), final loss %.4f%s\n",
                spec.program, static_cast<unsigned long long>(global_step), seconds_since(t_start), R, last_loss,
                opt.checkpoint.empty() ? "" : fmt::format("; checkpoint {}", opt.checkpoint).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int trainer_main(int argc, char** argv, const TrainerSpec& spec) {
  Options opt;
  try {
    parse_options(argc, argv, opt);
  } catch (const fastrun::ConfigError& e) {
    std::fprintf(stderr, "%s: %s\n", spec.program, e.what());
    return 2;
  }
  try {
    if (opt.nproc > 0) {  // self-spawning: this process becomes rank 0 and starts the others
      if (!spec.self_spawn)
        throw fastrun::ConfigError(fmt::format("--nproc {} starts CPU ranks; run {} under the launcher with GPUs instead: "
                                               "fastrun --devices 0[,1...] {}",
                                               opt.nproc, spec.program, spec.program));
      fastrun::SelfLaunchOptions launch;
      launch.nproc = opt.nproc;
      launch.log_dir = opt.log_dir;
      fastrun::launch_self(argc, argv, launch);
    }
    if (spec.before_join) spec.before_join(opt);
    return train(opt, spec);
  } catch (const fastrun::ConfigError& e) {
    std::fprintf(stderr, "%s: %s\n", spec.program, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", spec.program, e.what());
    return 1;
  }
}

}  // namespace train_mlp

// Jobs under the cluster's own engine, as real processes on 127.0.0.1 (docs/multinode.md,
// "Under Slurm", "Under mpirun"): the environment exactly as srun sets it for a two-node step
// (tests/test_support/engine_env.h), and a real mpirun when the build found one. No test sets
// MASTER_ADDR/MASTER_PORT: the ranks and launchers find the store from the engine's variables.
#include <catch2/catch.hpp>

#include <memory>
#include <random>

#include "fastrun/runtime/cluster/engine_job.h"
#include "process_runner.h"
#include "test_support/engine_env.h"
#include "test_support/free_port.h"

using namespace fastrun::test;
using namespace std::chrono_literals;
using Strings = std::vector<std::string>;
using Env = std::map<std::string, std::optional<std::string>>;

namespace {

// A job id whose derived store port (step `step`) is free now: parallel tests do not collide.
long free_job_id(long step) {
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 1000; ++i) {
    const long job = std::uniform_int_distribution<long>(1, 9'999'999)(rng);
    if (port_is_free(fastrun::cluster::derived_port(static_cast<std::uint64_t>(job), static_cast<std::uint64_t>(step))))
      return job;
  }
  FAIL("no free derived port");
  return 0;
}

// Nothing inherited that would pick the rank layout or the store instead of the engine's.
Env clean_env() {
  Env env;
  for (const auto& n : engine_variable_names()) env[n] = std::nullopt;
  for (const char* n : {"FASTRUN_RANK", "FASTRUN_WORLD_SIZE", "FASTRUN_LOCAL_RANK", "FASTRUN_LOCAL_WORLD_SIZE",
                        "FASTRUN_NODE_RANK", "FASTRUN_NNODES", "FASTRUN_STORE", "FASTRUN_MASTER_ADDR",
                        "FASTRUN_MASTER_PORT", "FASTRUN_GLOO_HOST", "FASTRUN_GLOBAL_SEED", "RANK", "WORLD_SIZE",
                        "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"})
    env[n] = std::nullopt;
  env["FASTRUN_TIMEOUT"] = "20";
  env["FASTRUN_BACKEND"] = "auto";
  return env;
}

Env task_env(const SlurmStep& step, int task) {
  Env env = clean_env();
  for (const auto& [k, v] : slurm_task_env(step, task)) env[k] = v;
  return env;
}

// The line the sparring partner's --allreduce prints after joining.
std::string layout_line(int rank, int world, int local, int local_world, int node, const char* source) {
  return fmt::format("layout rank {} of {} local {} of {} node {} from {}", rank, world, local, local_world, node,
                     source);
}

}  // namespace

TEST_CASE("srun ./train: a two-node step of four tasks joins and all-reduces without MASTER_ADDR",
          "[launcher][cluster][slurm]") {
  SlurmStep step;
  step.step_id = 1;
  step.job_id = free_job_id(step.step_id);
  step.nodelist = "127.0.0.[1-2]";  // two "nodes" on this machine; the first hosts the store
  step.tasks_per_node = {2, 2};
  TempDir io;
  std::vector<std::unique_ptr<Process>> tasks;
  for (int t = 3; t >= 0; --t) {  // task 0 last: the others retry until it hosts the store
    std::filesystem::create_directory(io.path() / std::to_string(t));
    tasks.push_back(std::make_unique<Process>(Strings{kPartner, "--allreduce"}, task_env(step, t),
                                              io.path() / std::to_string(t)));
  }
  for (int t = 0; t < 4; ++t) {
    const RunResult r = tasks[static_cast<std::size_t>(3 - t)]->finish(30s);
    INFO("task " << t << " stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "allreduce 10 hier"));  // hier (never shm alone) across the step's nodes
    CHECK(contains(r.out, layout_line(t, 4, t % 2, 2, t / 2, "slurm")));
  }
}

TEST_CASE("srun --ntasks-per-node=1 fastrun: two launchers take nodes and master from the step",
          "[launcher][cluster][slurm]") {
  SlurmStep step;
  step.step_id = 0;
  step.job_id = free_job_id(step.step_id);
  step.nodelist = "127.0.0.[1-2]";
  step.tasks_per_node = {1, 1};
  TempDir dir;
  const std::string dump = dir.str() + "/dump-%r";
  std::vector<std::unique_ptr<Process>> launchers;
  for (int k = 1; k >= 0; --k) {
    Env env = task_env(step, k);
    env["FASTRUN_STORE_TOKEN"] = "cluster-test-secret";  // as the job script would export it
    std::filesystem::create_directory(dir.path() / ("io" + std::to_string(k)));
    launchers.push_back(std::make_unique<Process>(cmd({"--nproc", k == 0 ? "1" : "2"}, {"--dump", dump, "--allreduce"}),
                                                  env, dir.path() / ("io" + std::to_string(k))));
  }
  for (auto& l : launchers) {
    const RunResult r = l->finish(30s);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.out, "allreduce 6 hier"));
  }
  const std::string store = fmt::format("tcp://127.0.0.1:{}", fastrun::cluster::derived_port(
                                                                  static_cast<std::uint64_t>(step.job_id), 0));
  for (int g = 0; g < 3; ++g) {
    INFO("global rank " << g);
    const Dump d = read_dump(dir.path() / ("dump-" + std::to_string(g)));
    CHECK(d.env.at("FASTRUN_RANK") == std::to_string(g));
    CHECK(d.env.at("FASTRUN_WORLD_SIZE") == "3");
    CHECK(d.env.at("FASTRUN_NODE_RANK") == (g == 0 ? "0" : "1"));
    CHECK(d.env.at("FASTRUN_LOCAL_RANK") == (g == 0 ? "0" : std::to_string(g - 1)));
    CHECK(d.env.at("FASTRUN_NNODES") == "2");
    CHECK(d.env.at("FASTRUN_STORE") == store);
    CHECK(d.env.at("MASTER_ADDR") == "127.0.0.1");
  }
}

TEST_CASE("srun fastrun with two tasks per node is a usage error before anything starts",
          "[launcher][cluster][slurm]") {
  SlurmStep step;  // 2 nodes x 2 tasks
  const RunResult r = run(cmd({"--nproc", "1"}, {"--exit", "0"}), task_env(step, 1));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "srun started 4 tasks on 2 nodes"));
  CHECK(contains(r.err, "srun --ntasks-per-node=1 fastrun"));
}

TEST_CASE("srun fastrun: a derived port already taken is named with where it came from",
          "[launcher][cluster][slurm]") {
  SlurmStep step;
  step.job_id = free_job_id(0);
  step.tasks_per_node = {1, 1};
  const auto port = fastrun::cluster::derived_port(static_cast<std::uint64_t>(step.job_id), 0);
  // Another job's listener on the port this step derives.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  Env env = task_env(step, 0);
  env["FASTRUN_STORE_TOKEN"] = "cluster-test-secret";
  const RunResult r = run(cmd({"--nproc", "1"}, {"--exit", "0"}), env);
  ::close(fd);
  INFO(r.err);
  CHECK(r.exit_code == 2);  // a usage error: the port is taken, before anything starts
  CHECK(contains(r.err, fmt::format("--master-port {} (from the first host of SLURM_STEP_NODELIST and a port derived "
                                    "from SLURM_JOB_ID and SLURM_STEP_ID; give --master-addr/--master-port to choose)",
                                    port)));
  CHECK(contains(r.err, fmt::format("port {} is in use on this host", port)));
}

#ifdef FASTRUN_MPIRUN
namespace {

// mpirun on this host only: its own control traffic on the loopback interface too.
Strings mpirun(int np, Strings program) {
  // Open MPI's session directory is /tmp/ompi.<host>.<uid> by default: two cases at once
  // (ctest -j) would race creating it ("mkdir ... File exists"). Each test process gets its own.
  static const TempDir session_base;
  Strings v{FASTRUN_MPIRUN, "--allow-run-as-root", "--oversubscribe", "--mca", "oob_tcp_if_include", "lo",
            "--mca", "orte_tmpdir_base", session_base.str(), "-np", std::to_string(np)};
  v.insert(v.end(), program.begin(), program.end());
  return v;
}

}  // namespace

TEST_CASE("mpirun -np 4 ./hello: ranks from OMPI_COMM_WORLD_*, a store on 127.0.0.1, a gloo all-reduce",
          "[launcher][cluster][openmpi]") {
  Env env = clean_env();
  env["FASTRUN_BACKEND"] = "gloo";
  const RunResult r = run(mpirun(4, {HELLO_BIN}), env, 60s);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(contains(r.out, fmt::format("hello from rank {} of 4 (local {}/4, node 0, from openmpi)", rank, rank)));
    CHECK(contains(r.out, fmt::format("rank {}: all-reduce of 1..4 = 10 over gloo\n", rank)));
  }
}

TEST_CASE("mpirun -np 4 ./train: a failing rank's exit code is mpirun's", "[launcher][cluster][openmpi]") {
  // Rank 2 exits before joining; the others would wait in join() for the timeout. The bound
  // is what "mpirun stops them" means: well before that timeout, however slow the start.
  Env env = clean_env();
  env["FASTRUN_TIMEOUT"] = "90";
  const RunResult r = run(mpirun(4, {kPartner, "--on", "2", "--exit", "3", "--allreduce"}), env, 120s);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.seconds < 60);
}

TEST_CASE("mpirun -np 2 fastrun --nproc 2: two launchers on one host are two nodes of one job",
          "[launcher][cluster][openmpi]") {
  TempDir dir;
  const std::string dump = dir.str() + "/dump-%r";
  Env env = clean_env();
  env["FASTRUN_STORE_TOKEN"] = "cluster-test-secret";
  const RunResult r = run(mpirun(2, {kFastrun, "--nproc", "2", kPartner, "--dump", dump, "--allreduce"}), env, 60s);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  for (int g = 0; g < 4; ++g) {
    INFO("global rank " << g);
    const Dump d = read_dump(dir.path() / ("dump-" + std::to_string(g)));
    CHECK(d.env.at("FASTRUN_RANK") == std::to_string(g));
    CHECK(d.env.at("FASTRUN_WORLD_SIZE") == "4");
    CHECK(d.env.at("FASTRUN_NODE_RANK") == std::to_string(g / 2));
    CHECK(d.env.at("FASTRUN_LOCAL_RANK") == std::to_string(g % 2));
    CHECK(contains(r.out, layout_line(g, 4, g % 2, 2, g / 2, "fastrun")));
  }
  CHECK(contains(r.out, "allreduce 10 hier"));  // two nodes: auto picks hier
}

TEST_CASE("mpirun -np 2 fastrun: a rank failing on node 1 stops both launchers with its code",
          "[launcher][cluster][openmpi]") {
  Env env = clean_env();
  env["FASTRUN_STORE_TOKEN"] = "cluster-test-secret";
  // The other ranks sleep 120 s: finishing well before that means the failure stopped them.
  const RunResult r =
      run(mpirun(2, {kFastrun, "--nproc", "2", kPartner, "--on", "3", "--exit", "5", "--sleep", "120"}), env, 150s);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.err, "rank 3"));
  CHECK(r.seconds < 60);
}
#endif

// What srun and mpirun tell a process (runtime/cluster/engine_job.h), and the rank layout and
// store a rank derives from it without MASTER_ADDR/MASTER_PORT (runtime/join/env_sources.h).
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "fastrun/runtime/cluster/engine_job.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/join/env_sources.h"
#include "test_support/engine_env.h"

using namespace fastrun;
using fastrun::test::EngineEnv;
using fastrun::test::ScopedEnv;

namespace {

std::map<std::string, std::string> with(std::map<std::string, std::string> env,
                                        const std::map<std::string, std::string>& more) {
  for (const auto& [k, v] : more) env[k] = v;
  return env;
}

std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("derived ports: one per job and step, in the documented range", "[cluster]") {
  std::set<int> ports;
  for (std::uint64_t job = 1000; job < 1010; ++job)
    for (std::uint64_t step = 0; step < 10; ++step) {
      const int p = cluster::derived_port(job, step);
      CHECK(p >= 20000);
      CHECK(p < 30000);
      ports.insert(p);
    }
  CHECK(ports.size() == 100);  // consecutive jobs and steps never share a port
  CHECK(cluster::derived_port(4242, 0) == cluster::derived_port(4242, 0));
  CHECK(cluster::derived_port(4242, 0) == 20000 + (4242 * 97) % 10000);
}

TEST_CASE("an srun task: its step from SLURM_* variables", "[cluster][slurm]") {
  test::SlurmStep step;
  step.job_id = 777;
  step.step_id = 3;
  step.nodelist = "gpu[07-08]";
  step.tasks_per_node = {2, 2};
  EngineEnv env(test::slurm_task_env(step, 3));
  const auto j = cluster::slurm_step();
  REQUIRE(j);
  CHECK(j->engine == "slurm");
  CHECK(j->task == 3);
  CHECK(j->ntasks == 4);
  CHECK(j->nnodes == 2);
  CHECK(j->node == 1);
  CHECK(j->local_task == 1);
  CHECK(j->local_tasks == 2);
  CHECK(j->master_host == "gpu07");
  CHECK(j->master_port == cluster::derived_port(777, 3));
  CHECK(cluster::engine_job()->engine == "slurm");
}

TEST_CASE("uneven tasks per node: the count of this task's node", "[cluster][slurm]") {
  test::SlurmStep step;
  step.nodelist = "n[1-4]";
  step.tasks_per_node = {3, 3, 3, 1};  // "3(x3),1"
  EngineEnv env(test::slurm_task_env(step, 9));
  const auto j = cluster::slurm_step();
  REQUIRE(j);
  CHECK(j->node == 3);
  CHECK(j->local_tasks == 1);
  CHECK(j->local_task == 0);
  ScopedEnv short_list("SLURM_STEP_TASKS_PER_NODE", "3(x3)");  // says nothing of node 3
  CHECK_THAT(config_error([] { cluster::slurm_step(); }), Catch::Contains("covering node 3"));
}

TEST_CASE("not a step: an sbatch script or an salloc shell is no srun step", "[cluster][slurm]") {
  auto vars = test::slurm_task_env(test::SlurmStep{}, 0);
  vars.erase("SLURM_STEP_ID");
  vars.erase("SLURM_STEPID");
  EngineEnv env(vars);
  CHECK_FALSE(cluster::slurm_step());
  // ./train run by the batch script itself (SLURM_NTASKS=4 there too): told to use srun.
  CHECK_THROWS_WITH(join_detail::detect_layout(),
                    Catch::Contains("SLURM_PROCID without SLURM_STEP_ID is the batch script itself") &&
                        Catch::Contains("srun ./train"));
}

TEST_CASE("malformed or inconsistent Slurm variables are errors naming them", "[cluster][slurm]") {
  const auto base = test::slurm_task_env(test::SlurmStep{}, 1);
  struct Case {
    std::map<std::string, std::string> change;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{{"SLURM_PROCID", "x"}}, "SLURM_PROCID='x' is not valid"},
      {{{"SLURM_JOB_ID", "-1"}}, "SLURM_JOB_ID='-1' is not valid"},
      {{{"SLURM_PROCID", "4"}}, "SLURM_PROCID=4 is not valid with SLURM_STEP_NUM_TASKS=4"},
      {{{"SLURM_NODEID", "2"}}, "SLURM_NODEID=2 is not valid with SLURM_STEP_NUM_NODES=2"},
      {{{"SLURM_STEP_TASKS_PER_NODE", "2(x"}}, "SLURM_STEP_TASKS_PER_NODE='2(x' is not valid"},
      {{{"SLURM_STEP_NODELIST", "n[1-3]"}}, "SLURM_STEP_NODELIST='n[1-3]' names 3 hosts but SLURM_STEP_NUM_NODES=2"},
      {{{"SLURM_STEP_NODELIST", "n[1-"}}, "is not a Slurm host list"},
  };
  for (const auto& c : cases) {
    INFO(c.message);
    EngineEnv env(with(base, c.change));
    const std::string m = config_error([] { cluster::slurm_step(); });
    CHECK_THAT(m, Catch::Contains(c.message));
  }
}

TEST_CASE("srun ./train: the layout and store come from the step, no MASTER_ADDR needed", "[cluster][slurm][join]") {
  test::SlurmStep step;
  step.job_id = 31337;
  step.step_id = 2;
  step.nodelist = "node[01-02]";
  for (int task : {0, 3}) {
    INFO("task " << task);
    EngineEnv env(test::slurm_task_env(step, task));
    const auto l = join_detail::detect_layout();
    CHECK(l.source == "slurm");
    CHECK(l.rank == task);
    CHECK(l.world_size == 4);
    CHECK(l.local_rank == task % 2);
    CHECK(l.local_world_size == 2);
    CHECK(l.node_rank == task / 2);
    CHECK(l.store_address == fmt::format("tcp://node01:{}", cluster::derived_port(31337, 2)));
    CHECK(l.host_store == (task == 0));
    CHECK_THAT(l.store_origin, Catch::Contains("SLURM_STEP_NODELIST"));
  }
}

TEST_CASE("srun ./train: MASTER_ADDR and MASTER_PORT win over the step's, each on its own", "[cluster][slurm][join]") {
  const auto base = test::slurm_task_env(test::SlurmStep{}, 1);
  {
    EngineEnv env(with(base, {{"MASTER_PORT", "23456"}}));
    CHECK(join_detail::detect_layout().store_address == "tcp://127.0.0.1:23456");
  }
  {
    EngineEnv env(with(base, {{"MASTER_ADDR", "10.1.2.3"}}));
    CHECK(join_detail::detect_layout().store_address ==
          fmt::format("tcp://10.1.2.3:{}", cluster::derived_port(4242, 0)));
  }
  {
    EngineEnv env(with(base, {{"FASTRUN_STORE", "file:///shared/job"}}));
    CHECK(join_detail::detect_layout().store_address == "file:///shared/job");
  }
}

TEST_CASE("srun ./train: rank 0 away from the step's first node is an error saying what to set",
          "[cluster][slurm][join]") {
  EngineEnv env(with(test::slurm_task_env(test::SlurmStep{}, 0), {{"SLURM_NODEID", "1"}}));
  const std::string m = config_error([] { join_detail::detect_layout(); });
  CHECK_THAT(m, Catch::Contains("rank 0 runs on node 1 of the srun step, not on its first node 127.0.0.1"));
  CHECK_THAT(m, Catch::Contains("MASTER_ADDR"));
}

TEST_CASE("mpirun ./train: the store at 127.0.0.1 on one node, at mpirun's host on several", "[cluster][openmpi]") {
  const std::map<std::string, std::string> base = {
      {"OMPI_COMM_WORLD_RANK", "2"},        {"OMPI_COMM_WORLD_SIZE", "4"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
      {"OMPI_MCA_orte_num_nodes", "2"},     {"OMPI_MCA_ess_base_jobid", "1721040897"},
      {"OMPI_MCA_orte_hnp_uri", "1721040896.0;tcp://192.0.2.2,10.0.0.5:50711;tcp6://[fd00::2]:37199"},
  };
  {
    EngineEnv env(base);
    const auto j = cluster::engine_job();
    REQUIRE(j);
    CHECK(j->engine == "openmpi");
    CHECK(j->task == 2);
    CHECK(j->ntasks == 4);
    CHECK(j->nnodes == 2);
    CHECK_FALSE(j->node);  // Open MPI exports no node index
    CHECK(j->master_host == "192.0.2.2");
    CHECK(j->master_port == cluster::derived_port(1721040897, 0));
    const auto l = join_detail::detect_layout();
    CHECK(l.source == "openmpi");
    CHECK(l.local_world_size == 2);
    CHECK(l.store_address == fmt::format("tcp://192.0.2.2:{}", cluster::derived_port(1721040897, 0)));
  }
  {
    EngineEnv env(with(base, {{"OMPI_MCA_orte_num_nodes", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
    CHECK(cluster::openmpi_job()->master_host == "127.0.0.1");
  }
  {
    EngineEnv env(with(base, {{"OMPI_MCA_orte_hnp_uri", "1721040896.0;tcp6://[fd00::2]:37199"}}));
    CHECK_THAT(config_error([] { cluster::openmpi_job(); }), Catch::Contains("names no tcp:// address"));
  }
  {
    EngineEnv env(with(base, {{"OMPI_COMM_WORLD_SIZE", "2"}}));
    CHECK_THAT(config_error([] { cluster::openmpi_job(); }),
               Catch::Contains("OMPI_COMM_WORLD_RANK=2 is not valid with OMPI_COMM_WORLD_SIZE=2"));
  }
}

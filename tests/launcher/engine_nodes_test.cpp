// fastrun under srun or mpirun (launcher/node_options.h): the node count, node rank and master
// come from the engine; explicit flags win for the master, contradictions are usage errors.
#include <catch2/catch.hpp>

#include "fastrun/launcher/node_options.h"
#include "fastrun/runtime/cluster/engine_job.h"
#include "fastrun/runtime/error.h"
#include "test_support/engine_env.h"

using namespace fastrun;
using namespace fastrun::launcher;
using fastrun::test::EngineEnv;

namespace {

// srun -N2 --ntasks-per-node=1 fastrun ...: task `node` of job 555, step 1.
std::map<std::string, std::string> one_per_node(int node, int nnodes = 2) {
  test::SlurmStep step;
  step.job_id = 555;
  step.step_id = 1;
  step.nodelist = "node[01-" + fmt::format("{:02}", nnodes) + "]";
  step.tasks_per_node.assign(static_cast<std::size_t>(nnodes), 1);
  return test::slurm_task_env(step, node);
}

std::string usage_error(const NodeOptions& flags) {
  try {
    plan_nodes(flags);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("under srun, one launcher per node: nodes, node rank and master from Slurm", "[launcher][cluster]") {
  for (int node : {0, 1, 2}) {
    INFO("node " << node);
    EngineEnv env(one_per_node(node, 3));
    const NodePlan p = plan_nodes({});
    CHECK(p.multi_node());
    CHECK(p.nnodes == 3);
    CHECK(p.node_rank == node);
    CHECK(p.master_addr == "node01");
    CHECK(p.master_port == cluster::derived_port(555, 1));
  }
}

TEST_CASE("under srun, explicit master flags win and agreeing flags are accepted", "[launcher][cluster]") {
  EngineEnv env(one_per_node(1));
  NodeOptions flags;
  flags.nnodes = 2;
  flags.node_rank = 1;
  flags.master_addr = "10.0.0.1";
  flags.master_port = 29500;
  const NodePlan p = plan_nodes(flags);
  CHECK(p.nnodes == 2);
  CHECK(p.node_rank == 1);
  CHECK(p.master_addr == "10.0.0.1");
  CHECK(p.master_port == 29500);
}

TEST_CASE("under srun, contradicting flags and several tasks per node are usage errors", "[launcher][cluster]") {
  {
    EngineEnv env(one_per_node(1));
    NodeOptions flags;
    flags.nnodes = 3;
    CHECK_THAT(usage_error(flags), Catch::Contains("--nnodes 3 contradicts SLURM_STEP_NUM_NODES=2"));
    flags = {};
    flags.node_rank = 0;
    CHECK_THAT(usage_error(flags), Catch::Contains("--node-rank 0 contradicts SLURM_NODEID=1"));
  }
  {
    // srun fixes the set of launchers and ends the step when one is lost: no elastic membership.
    EngineEnv env(one_per_node(1));
    NodeOptions flags;
    parse_nnodes("1:2", flags);
    CHECK_THAT(usage_error(flags), Catch::Contains("--nnodes 1:2: under slurm the engine fixes the nodes "
                                                   "(SLURM_STEP_NUM_NODES=2)"));
  }
  {
    EngineEnv env(one_per_node(1));
    test::ScopedEnv var("FASTRUN_NNODES", "4");
    CHECK_THAT(usage_error({}), Catch::Contains("FASTRUN_NNODES 4 contradicts SLURM_STEP_NUM_NODES=2"));
  }
  {
    test::SlurmStep step;  // 2 nodes x 2 tasks
    EngineEnv env(test::slurm_task_env(step, 2));
    const std::string m = usage_error({});
    CHECK_THAT(m, Catch::Contains("srun started 4 tasks on 2 nodes"));
    CHECK_THAT(m, Catch::Contains("--ntasks-per-node=1"));
    CHECK_THAT(m, Catch::Contains("srun ./train"));
  }
}

TEST_CASE("under srun with one task in all, the job stays on this node", "[launcher][cluster]") {
  test::SlurmStep step;
  step.nodelist = "node01";
  step.tasks_per_node = {1};
  EngineEnv env(test::slurm_task_env(step, 0));
  CHECK_FALSE(plan_nodes({}).multi_node());
}

TEST_CASE("under mpirun, each launcher is a node: node rank = its MPI rank", "[launcher][cluster]") {
  EngineEnv env({{"OMPI_COMM_WORLD_RANK", "1"},
                 {"OMPI_COMM_WORLD_SIZE", "2"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                 {"OMPI_MCA_orte_num_nodes", "1"},
                 {"OMPI_MCA_ess_base_jobid", "99"}});
  const NodePlan p = plan_nodes({});
  CHECK(p.nnodes == 2);
  CHECK(p.node_rank == 1);
  CHECK(p.master_addr == "127.0.0.1");
  CHECK(p.master_port == cluster::derived_port(99, 0));
  NodeOptions flags;
  flags.node_rank = 0;
  CHECK_THAT(usage_error(flags), Catch::Contains("--node-rank 0 contradicts OMPI_COMM_WORLD_RANK=1"));
}

#include "fastrun/launcher/failure_record.h"

#include <sys/wait.h>

#include <chrono>
#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

#include "fastrun/launcher/exit_status.h"
#include "fastrun/launcher/spawn.h"
#include "fastrun/runtime/log/log.h"

namespace fastrun::launcher {
namespace {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return stamp;
}

}  // namespace

std::string failure_record_json(const FailureRecord& r) {
  nlohmann::json j;
  j["run_id"] = r.run_id;
  j["attempt"] = r.attempt;
  j["rank"] = r.rank;
  j["local_rank"] = r.local_rank;
  j["node_rank"] = r.node_rank;
  j["host"] = r.host;
  j["pid"] = r.pid;
  // Exactly one of exit_code and signal is a number, the other null.
  j["exit_code"] = WIFEXITED(r.status) ? nlohmann::json(WEXITSTATUS(r.status)) : nlohmann::json(nullptr);
  j["signal"] = WIFSIGNALED(r.status) ? nlohmann::json(signal_name(WTERMSIG(r.status))) : nlohmann::json(nullptr);
  j["launcher_exit_code"] = status_exit_code(r.status);
  j["description"] = describe_status(r.status);
  const std::string hint = status_hint(r.status);
  j["hint"] = hint.empty() ? nlohmann::json(nullptr) : nlohmann::json(hint);
  j["job_failure"] = r.recorded;
  j["stderr_tail"] = r.stderr_tail;
  if (const auto& c = r.last_collective) {
    j["last_collective"] = {{"group", c->group},
                            {"op", c->op.op},
                            {"seq", c->op.seq},
                            {"state", c->state},
                            {"description", describe_numbered(c->op)}};
  } else {
    j["last_collective"] = nullptr;
  }
  j["time"] = utc_now();
  // Invalid UTF-8 in a rank's stderr is replaced, not an exception on the failure path.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string write_failure_record(const std::string& rank_log_dir, const FailureRecord& record) {
  const std::string path = rank_log_dir + "/failure.json";
  std::ofstream out(path, std::ios::trunc);
  out << failure_record_json(record);
  out.close();
  if (!out) {
    log::warn("could not write the failure record {}", path);
    return {};
  }
  return path;
}

}  // namespace fastrun::launcher

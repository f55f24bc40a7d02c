#pragma once
// What the subjects that time whole jobs share (launch, restart): the clock every process of the
// machine reads alike, timestamps left in files by ranks, and children started and reaped by hand
// (fork/exec: no Boost.Process thread or pipe in the way of what is timed).
#include <sys/types.h>

#include <string>
#include <vector>

namespace fastrun::bench {

// CLOCK_MONOTONIC in ms: the machine's, shared by every process and network namespace.
double now_ms();
// now_ms() into `path`; read_stamp gives it back, or -1 when the file is missing or empty.
void write_stamp(const std::string& path);
double read_stamp(const std::string& path);

// Starts argv (PATH lookup, for prefixes such as nsenter) with this environment plus
// `extra_env`, stdout on /dev/null (and stderr with quiet_stderr, or into the file err_to).
pid_t start(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            bool quiet_stderr = false, const std::string& err_to = "");
// Waits for pid; its exit code, or 128 + the signal that ended it.
int reap(pid_t pid);

double median(std::vector<double> v);

// This binary, and the fastrun command beside it (an install's bin/, or ../tools/ in a build
// tree) unless `given` names one; a ConfigError naming `subject` when there is none.
std::string self_exe();
std::string find_fastrun(const std::string& given, const std::string& subject);

}  // namespace fastrun::bench

#pragma once
// What a rank's wait status means to the launcher: the words the summary uses, the code the
// launcher exits with, and whether it counts as a failure (anything but exit 0).
#include <string>

namespace fastrun::launcher {

// "exited with code 3", "killed by signal SIGKILL".
std::string describe_status(int status);

// The shell's convention: the exit code, or 128 + the signal.
int status_exit_code(int status);

bool status_failed(int status);

// What a status may mean beyond its words: " (out of memory? ...)" for SIGKILL, else "".
std::string status_hint(int status);

}  // namespace fastrun::launcher

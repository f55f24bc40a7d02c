# shellcheck shell=bash
# The skip of test scripts (sourced): says why and ends the script with the code CTest reports as
# "Skipped" (SKIP_RETURN_CODE, tests/CMakeLists.txt; test_support/skip.h says why a code and not
# the text). Call it from the script's own shell, not from a $(...) or a pipeline: there it would
# end only that subshell.
#   fastrun_skip "'mpirun' is not installed (tools/install-deps.sh installs Open MPI)"
fastrun_skip() {
  echo "FASTRUN-SKIPPED: $*"
  exit 77
}

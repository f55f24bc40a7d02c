#pragma once
// The MPI bench programs' arguments (CLI11): parsed on every rank, reported by rank 0 alone.
#include <mpi.h>

#include <CLI/CLI.hpp>

namespace fastrun::bench::mpi {

// True to go on; false when the program should end with `exit_code` (0 after --help, 2 for a bad
// argument, which CLI11 names); MPI is finalized then.
inline bool parse_args(CLI::App& app, int argc, char** argv, int rank, int& exit_code) {
  try {
    app.parse(argc, argv);
    return true;
  } catch (const CLI::ParseError& e) {
    if (rank == 0) app.exit(e);  // the usage, or the bad argument named
    MPI_Finalize();
    exit_code = e.get_exit_code() == 0 ? 0 : 2;
    return false;
  }
}

}  // namespace fastrun::bench::mpi

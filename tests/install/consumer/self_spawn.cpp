// A program that uses only launch_self (linked against fastrun::launcher alone): two ranks,
// each prints the rank it was given.
#include <cstdio>

#include <fastrun/launcher/self_launch.h>

int main(int argc, char** argv) {
  fastrun::SelfLaunchOptions options;
  options.nproc = 2;
  try {
    const int rank = fastrun::launch_self(argc, argv, options);
    std::printf("self_spawn: rank %d\n", rank);
  } catch (const std::exception& e) {
    std::printf("self_spawn error: %s\n", e.what());
    return 3;
  }
  return 0;
}

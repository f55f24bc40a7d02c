// The `fastrun` command (docs/launching.md). Everything lives in fastrun::launcher (cli.cpp).
#include "fastrun/launcher/cli.h"

int main(int argc, char** argv) { return fastrun::launcher::cli_main(argc, argv); }

#pragma once
// The gloo backend as a module in shared builds. Debian's libgloo needs libibverbs, libnl and
// hiredis; so that a program that never makes a gloo group never loads them, the backend is
// libfastrun_gloo.so, which the runtime loads from its own directory on the first gloo group.
// (Static builds compile it into the runtime instead.) Internal header.
//
// Threading: safe from any thread; the module is loaded once.
#include "fastrun/runtime/backend/factory.h"

namespace fastrun::backend {

// The module's factory. ConfigError naming the file and the loader's reason when it cannot be
// loaded (a prefix or build tree missing the file). Retried on the next call after a failure.
Factory load_gloo_module();

}  // namespace fastrun::backend

// Defined by the module: its backend factory.
extern "C" fastrun::backend::Factory fastrun_gloo_backend();

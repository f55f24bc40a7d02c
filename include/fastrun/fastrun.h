#pragma once
// fastrun's public surface in one include, for a CPU or GPU program:
//   #include <fastrun/fastrun.h>     link fastrun::fastrun (CMake) or `pkg-config fastrun`
// It covers joining a job and its process groups (runtime), DDP, object collectives, stores,
// in-process spawn (launcher) and the samplers. The CUDA/NCCL component adds only device
// helpers (fastrun/runtime/cuda/device_buffer.h); its backend is reached by name. Every header
// included here is installed and includes only installed headers; nothing else is public.
// docs/index.md maps the topics; docs/installing.md shows the ways to depend on fastrun.

#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/ddp/no_sync_guard.h"
#include "fastrun/runtime/env/registry.h"
#include "fastrun/runtime/error.h"
#include "fastrun/runtime/fastnlp_compat/driver.h"
#include "fastrun/runtime/join/context.h"
#include "fastrun/runtime/join/join.h"
#include "fastrun/runtime/objects/object_collectives.h"
#include "fastrun/runtime/store/factory.h"
#include "fastrun/runtime/store/prefix_store.h"
#include "fastrun/runtime/version.h"
#include "fastrun/launcher/self_launch.h"
#include "fastrun/samplers/samplers.h"

#pragma once
// All of fastrun::samplers (see docs/samplers.md).
#include "fastrun/samplers/bucketed_batch_sampler.h"
#include "fastrun/samplers/error.h"
#include "fastrun/samplers/random_batch_sampler.h"
#include "fastrun/samplers/random_sampler.h"
#include "fastrun/samplers/reproduce_batch_sampler.h"
#include "fastrun/samplers/sequential_sampler.h"
#include "fastrun/samplers/unrepeated_sampler.h"

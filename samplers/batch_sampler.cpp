#include "fastrun/samplers/batch_sampler.h"

#include <string>

#include "fastrun/samplers/error.h"

namespace fastrun::samplers {

void check_batch_size(std::uint64_t batch_size, std::string_view who) {
  if (batch_size == 0) throw SamplerError(std::string(who) + ": batch_size = 0 (accepted: batch_size >= 1)");
}

}  // namespace fastrun::samplers

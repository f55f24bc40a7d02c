#pragma once
// The samplers' one exception type. The samplers library depends on nothing else in fastrun,
// so it does not derive from fastrun::Error; callers that want one hierarchy can catch
// std::invalid_argument. Messages name the bad value and what is accepted.
#include <stdexcept>
#include <string>

namespace fastrun::samplers {

class SamplerError : public std::invalid_argument {
 public:
  explicit SamplerError(const std::string& what) : std::invalid_argument(what) {}
};

}  // namespace fastrun::samplers

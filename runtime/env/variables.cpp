// The definitions of the FASTRUN_* variables, generated from variables.def. Do not add a
// variable here: add its one FASTRUN_ENV_VARIABLE line to variables.def.
#include "fastrun/runtime/env/registry.h"

namespace fastrun::env {

// FASTRUN_ENV_VARIABLE(constant, "NAME", type, fields...) -> const Variable constant{"NAME", Type::type, fields...};
#define FASTRUN_ENV_VARIABLE(constant, name, type, ...) const Variable constant{name, Type::type, __VA_ARGS__};
#include "fastrun/runtime/env/variables.def"
#undef FASTRUN_ENV_VARIABLE

const std::vector<const Variable*>& all() {
  static const std::vector<const Variable*> vars = {
#define FASTRUN_ENV_VARIABLE(constant, ...) &constant,
#include "fastrun/runtime/env/variables.def"
#undef FASTRUN_ENV_VARIABLE
  };
  return vars;
}

}  // namespace fastrun::env

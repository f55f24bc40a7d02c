#pragma once
// Forwarding header: the fastNLP driver surface moved to runtime/fastnlp_compat/driver.h (the
// folder says what it is: compatibility with fastNLP's driver calls). Kept so that programs
// written against the old path still build; include the new path in new code.
#include "fastrun/runtime/fastnlp_compat/driver.h"

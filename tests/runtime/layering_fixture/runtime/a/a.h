#pragma once
// Fixture for check_folder_cycles.py (not compiled): runtime/a -> runtime/b, by the public name.
#include "fastrun/runtime/base.h"
#include "fastrun/runtime/b/b.h"

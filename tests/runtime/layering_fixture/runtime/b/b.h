#pragma once
// Fixture for check_folder_cycles.py (not compiled): runtime/b -> runtime/a, by a relative
// include, which closes the cycle the check must report.
#include "../base.h"
#include "../a/a.h"

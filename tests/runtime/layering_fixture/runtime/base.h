#pragma once
// Fixture for check_folder_cycles.py (not compiled): the base both folders may use.

#pragma once
// Slurm host lists (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST), expanded the way
// `scontrol show hostnames` does, so that a rank or launcher can name the step's first node.
//
// Grammar (tests/runtime/slurm_hostlist_test.cpp is the table):
//   list  := item (sep item)*          sep: ',' or white space; commas inside brackets belong
//                                      to the bracket; empty items are skipped
//   item  := text? ('[' ranges ']' text?)+ | text
//   ranges:= range (',' range)*
//   range := digits | digits '-' digits    low <= high; the low bound's digit count is the
//                                          width: [01-10] gives 01..10, [1-10] gives 1..10
// Several bracket groups in one item expand as a product, the first group varying slowest
// (rack[1-2]-n[1-2]: rack1-n1, rack1-n2, rack2-n1, rack2-n2). Order and duplicates are kept.
// Checked against scontrol 22.05: the same names for every list it accepts. Two differences,
// both deliberate: text after the last bracket (n[001-003]-ib) is accepted (scontrol 22.05
// rejects it, so Slurm never prints such a list, but users and other tools write them); an
// unbalanced bracket or spaces inside brackets are errors (scontrol turns some into odd names).
#include <string>
#include <string_view>
#include <vector>

namespace fastrun::cluster {

// At most this many host names (Slurm's own limit per range is 64 Ki).
constexpr std::size_t kMaxHosts = 65536;

// ConfigError naming `source` (the variable it came from), the list, the position and what is
// accepted, for a list without a name, an unbalanced or nested bracket, a bound that is not a number,
// a reversed range or a list of more than kMaxHosts names.
std::vector<std::string> expand_hostlist(std::string_view list, std::string_view source);

}  // namespace fastrun::cluster

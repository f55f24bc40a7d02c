#pragma once
// Where a trainer starts from: --resume's checkpoint, or with --resume-latest the last one written
// to --checkpoint when there is one. Under fastrun --max-restarts every rank of the last attempt
// is gone before this one starts, so each rank of this one reads the same file and every attempt
// goes on where the last one's rank 0 left it (docs/restarts.md).
#include <filesystem>
#include <string>

namespace fastrun_examples {

template <class Options>
std::string resume_path(const Options& o) {
  if (o.resume_latest && std::filesystem::exists(o.checkpoint)) return o.checkpoint;
  return o.resume;
}

}  // namespace fastrun_examples

#pragma once
// The same set+get mixes as `fastrun-bench store`, run by torch.distributed.FileStore through
// bench/torch_filestore.py, so the file store is compared with torch's in the same run.
#include <map>
#include <string>

namespace fastrun::bench {

// Round trips per second of torch's FileStore, its file in a new directory inside `dir`, for
// each process count (1 and 4), or an empty map and `why` when no python3 here imports torch or
// the script is not found. `pattern`: "rewrite" (64 keys per process, set again and again) or
// "fresh" (every set of a new key, as in a rendezvous).
std::map<int, double> torch_filestore_rates(double seconds, const std::string& dir, const std::string& pattern,
                                            std::string& why);

}  // namespace fastrun::bench

#include "fastrun/runtime/process_group/op_name.h"

#include <mutex>
#include <set>
#include <string>

namespace fastrun {

OpName OpName::intern(std::string_view text) {
  // Never freed: an OpName may outlive any object that made it (a flight record read at exit).
  // The texts are op names, a few dozen at most in a process.
  static std::mutex mutex;
  static auto* texts = new std::set<std::string, std::less<>>;
  std::lock_guard lock(mutex);
  auto it = texts->find(text);
  if (it == texts->end()) it = texts->emplace(text).first;
  OpName name;
  name.text_ = *it;
  return name;
}

}  // namespace fastrun

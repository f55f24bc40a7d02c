#pragma once
// The launcher's side of the job's failure record (kFailureKey in the job's store, job_keys.h),
// which every rank's join() and ops watch. A store that cannot be reached is warned about and
// otherwise ignored: the ranks are stopped by signals either way.
#include <optional>
#include <string>

#include "fastrun/runtime/store/store.h"

namespace fastrun::launcher {

class FailureKey {
 public:
  explicit FailureKey(Store* store) : store_(store) {}  // null: nothing is recorded

  // Records why, unless a failure is recorded already (a rank's own report_failure() may have
  // come first: the first one wins).
  void set(const std::string& why) const;

  // The job's failure record, "" when none or unreadable.
  std::string recorded() const;

  // The global rank a record blames ("rank K: why", as ranks and the launcher write it);
  // nullopt for any other text (e.g. another node's failure).
  static std::optional<int> blamed_rank(const std::string& record);

  // True when rank r is known not to have joined: its peer key is absent from the store (join()
  // publishes it before anything else). False when it joined or the store cannot tell.
  bool known_unjoined(int r) const;

 private:
  Store* store_;
};

}  // namespace fastrun::launcher

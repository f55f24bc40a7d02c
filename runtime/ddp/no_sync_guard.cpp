#include "fastrun/runtime/ddp/no_sync_guard.h"

#include "fastrun/runtime/ddp/ddp.h"
#include "fastrun/runtime/process_group/no_sync.h"

namespace fastrun {

NoSyncGuard::NoSyncGuard(int level) : previous_level_(exchange_no_sync_override(level)) {}

NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp) : ddp_(&ddp), previous_sync_(ddp.begin_no_sync()) {}

NoSyncGuard::~NoSyncGuard() {
  if (ddp_ != nullptr) ddp_->sync_ = previous_sync_;
  else exchange_no_sync_override(previous_level_);
}

}  // namespace fastrun

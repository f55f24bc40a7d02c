#pragma once
// The FASTRUN_NO_SYNC level (fastNLP's FASTNLP_NO_SYNC), process-wide:
//   0  normal;
//   1  barriers are no-ops;
//   2  every collective is local: all_reduce/broadcast leave the buffer as it is, all_gather
//      fills only this rank's slot, reduce_scatter copies this rank's own block; object
//      collectives return only this rank's object (see objects/object_collectives.h).
// The level is FASTRUN_NO_SYNC (parsed once per process, on first use) unless a scoped guard
// (ddp/no_sync_guard.h) or set_no_sync_level overrides it.
// Thread-safety: an atomic; a guard in one thread is seen by all threads of the process, as
// fastNLP's environment-variable switch is.
namespace fastrun {

int no_sync_level();
void set_no_sync_level(int level);  // ConfigError unless 0, 1 or 2; overrides FASTRUN_NO_SYNC
// For scoped guards: sets the override (-1 = none: back to FASTRUN_NO_SYNC), returns the previous.
int exchange_no_sync_override(int level);

}  // namespace fastrun

// Compiled into every program that links fastrun::nccl (an INTERFACE source of that target).
// A program reaches the nccl backend only by name (FASTRUN_BACKEND, "auto"), never by symbol, so
// without this reference the linker would drop libfastrun_nccl under --as-needed, or leave its
// registering object in the static archive, and the backend would be missing at run time.
extern "C" int fastrun_nccl_component();

namespace {
[[maybe_unused]] const int fastrun_nccl_linked = fastrun_nccl_component();
}  // namespace

// Replaced by the launcher's sources.
namespace fastrun::launcher { int placeholder() { return 0; } }

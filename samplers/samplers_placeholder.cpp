// Replaced by the samplers' sources.
namespace fastrun::samplers { int placeholder() { return 0; } }

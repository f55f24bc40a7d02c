#pragma once
// The memory rates behind `fastrun-bench allreduce-mpi`'s bound columns (docs/benchmarks.md,
// "All-reduce against Open MPI", "The bound"): how fast `threads` threads move c = a + b, with
// the all-reduce's own reduce kernel, on arrays past the caches and on arrays of a given size.
#include <cstddef>

namespace fastrun::bench {

// The largest cache CPU 0 reports in /sys/devices/system/cpu/cpu0/cache (bytes; 0 if none).
std::size_t last_level_cache_bytes();

// MemAvailable from /proc/meminfo in bytes (0 if unknown).
std::size_t available_memory_bytes();

// Bytes per second moved by `threads` threads at once doing c = a + b (float32 sum, with
// kernels::reduce, the all-reduce's kernel) over arrays a, b, c of `array_bytes` each, every
// thread its own contiguous share (unpinned, like the all-reduce's ranks), counted as STREAM
// counts it: 12 bytes per element (read a, read b, write c; the read-for-ownership of c's lines
// that a plain store costs is not counted). Each thread runs `passes` passes; the best of
// `batches` timed batches counts.
double add_rate(int threads, std::size_t array_bytes, int passes, int batches);

}  // namespace fastrun::bench

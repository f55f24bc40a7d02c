#pragma once
// The one futex wrapper: a 32-bit word that a thread sleeps on until another changes it and
// wakes it. Shared (not FUTEX_PRIVATE): every word fastrun sleeps on lives in memory mapped by
// several processes (the shm store's wait buckets, the shm backend's step and doorbell words),
// and a private futex is keyed by address space, so a wake from another process would be lost.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace fastrun::os {

// Sleeps while `word` holds `expected`, for at most `timeout` (none: returns at once). Returns
// false when the timeout passed, true otherwise: woken, the word already differed (EAGAIN), or a
// signal interrupted the sleep (EINTR) — every case means "look again" to the caller.
bool futex_wait(std::uint32_t& word, std::uint32_t expected, std::chrono::nanoseconds timeout);
bool futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout);

// Wakes every thread, in any process, sleeping on `word`.
void futex_wake_all(std::uint32_t& word);
void futex_wake_all(std::atomic<std::uint32_t>& word);

}  // namespace fastrun::os

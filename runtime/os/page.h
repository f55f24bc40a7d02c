#pragma once
// The page that shared-memory segments are laid out and reserved in: tmpfs allocates whole
// pages, so a reservation or a data area that starts mid-page would share its first page with
// what comes before it (the shm channel's and mailboxes' layouts, the shm store's reservations).
#include <cstddef>

namespace fastrun::os {

inline constexpr std::size_t kPageBytes = 4096;

constexpr std::size_t round_up_to_page(std::size_t bytes) { return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes; }

}  // namespace fastrun::os

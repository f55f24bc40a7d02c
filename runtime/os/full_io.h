#pragma once
// Whole-buffer reads and writes: retry on EINTR and short transfers, so no caller sees a partial
// write or mistakes an interrupted read for the end of a file.
#include <sys/types.h>

#include <cstddef>

namespace fastrun::os {

// Writes all of [data, data+n) to fd. False on any error but EINTR (errno says which).
bool write_all(int fd, const void* data, std::size_t n);

// Reads into [data, data+n) until it is full or the end of the file. Returns the bytes read
// (fewer than n only at the end of the file), or -1 on any error but EINTR (errno says which).
ssize_t read_full(int fd, void* data, std::size_t n);

}  // namespace fastrun::os

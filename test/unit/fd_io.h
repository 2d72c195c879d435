// fd_io.h - whole-buffer reads and writes on pipes, for the unit tests that
// talk to a forked peer process.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstddef>

namespace test_io {

inline bool write_all(int fd, const void* data, size_t bytes) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::write(fd, p, bytes);
        if (n <= 0) return false;
        p += n;
        bytes -= static_cast<size_t>(n);
    }
    return true;
}

inline bool read_all(int fd, void* data, size_t bytes) {
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::read(fd, p, bytes);
        if (n <= 0) return false;
        p += n;
        bytes -= static_cast<size_t>(n);
    }
    return true;
}

}  // namespace test_io

// staging.h - reusable pinned host buffers for the host-staging path.
#pragma once

#include <array>
#include <cstddef>

#include "device/device.h"

namespace gpucoll {

// A pinned host allocation owned through a Device; freed on destruction.
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    ~PinnedBuffer() { reset(); }

    // Ensures at least bytes of capacity (grows geometrically, never shrinks).
    Status reserve(Device* device, size_t bytes);
    void reset();
    // Forgets the buffer without freeing it: a send that was abandoned
    // (inter/transport.h) may still read it.
    void leak() { ptr_ = nullptr, capacity_ = 0; }
    void* data() const { return ptr_; }
    size_t capacity() const { return capacity_; }

private:
    Device* device_ = nullptr;
    void* ptr_ = nullptr;
    size_t capacity_ = 0;
};

// GPUCOLL_STAGING_SLOTS buffers, so one call can hold a send and a recv buffer.
class StagingPool {
public:
    Status get(Device* device, int slot, size_t bytes, void** host);
    void release();

private:
    std::array<PinnedBuffer, GPUCOLL_STAGING_SLOTS> slots_;
};

}  // namespace gpucoll

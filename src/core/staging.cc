#include "core/staging.h"

#include <bit>

namespace gpucoll {

Status PinnedBuffer::reserve(Device* device, size_t bytes) {
    if (bytes <= capacity_ && device == device_) return kSuccess;
    reset();
    // Round up to a power of two (at least 64 KiB) so growing sizes do not
    // reallocate on every call.
    size_t want = std::bit_ceil(bytes < (size_t{64} << 10) ? (size_t{64} << 10) : bytes);
    void* p = nullptr;
    GPUCOLL_TRY(device->alloc_host(&p, want));
    device_ = device;
    ptr_ = p;
    capacity_ = want;
    return kSuccess;
}

void PinnedBuffer::reset() {
    if (ptr_ != nullptr) device_->free_host(ptr_);
    device_ = nullptr;
    ptr_ = nullptr;
    capacity_ = 0;
}

Status StagingPool::get(Device* device, int slot, size_t bytes, void** host) {
    if (slot < 0 || slot >= GPUCOLL_STAGING_SLOTS || host == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "staging slot %d out of range 0..%d", slot,
                         GPUCOLL_STAGING_SLOTS - 1);
    GPUCOLL_TRY(slots_[slot].reserve(device, bytes));
    *host = slots_[slot].data();
    return kSuccess;
}

void StagingPool::release() {
    for (auto& b : slots_) b.reset();
}

}  // namespace gpucoll

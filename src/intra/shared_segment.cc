#include "intra/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

namespace gpucoll::intra {

namespace {
constexpr size_t kHeaderBytes = 128;
static_assert(sizeof(SegmentHeader) <= kHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared flags must be lock-free");
}  // namespace

size_t SharedSegment::bytes_for(int size) {
    return kHeaderBytes + sizeof(RankSlot) * static_cast<size_t>(size);
}

SharedSegment::~SharedSegment() {
    if (base_ != nullptr) munmap(base_, bytes_);
    close_fd();
}

void SharedSegment::close_fd() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

RankSlot& SharedSegment::slot(int rank) const {
    auto* first = reinterpret_cast<RankSlot*>(static_cast<char*>(base_) + kHeaderBytes);
    return first[rank];
}

Status SharedSegment::map(int fd, size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return set_error(GPUCOLL_ERR_SYSTEM, "mapping the node's shared segment (%zu bytes): %s",
                         bytes, std::strerror(errno));
    base_ = p;
    bytes_ = bytes;
    return kSuccess;
}

Status SharedSegment::create(int size) {
    const size_t bytes = bytes_for(size);
    fd_ = memfd_create("gpucoll-node-segment", MFD_CLOEXEC);
    if (fd_ < 0)
        return set_error(GPUCOLL_ERR_SYSTEM, "memfd_create for the node segment: %s",
                         std::strerror(errno));
    if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0)
        return set_error(GPUCOLL_ERR_SYSTEM, "sizing the node segment to %zu bytes: %s", bytes,
                         std::strerror(errno));
    GPUCOLL_TRY(map(fd_, bytes));
    // Fresh memfd pages are zero; construct the atomics explicitly anyway.
    auto* h = new (base_) SegmentHeader{};
    h->size = static_cast<uint32_t>(size);
    for (int r = 0; r < size; ++r) new (&slot(r)) RankSlot{};
    return kSuccess;
}

Status SharedSegment::attach(int leader_pid, int leader_fd, int size) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", leader_pid, leader_fd);
    int fd = ::open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return set_error(GPUCOLL_ERR_SYSTEM,
                         "opening the node leader's segment %s: %s (ranks of one node must run "
                         "as the same user, in the same PID namespace)",
                         path, std::strerror(errno));
    Status s = map(fd, bytes_for(size));
    ::close(fd);
    if (s != kSuccess) return s;
    if (header().size != static_cast<uint32_t>(size))
        return set_error(GPUCOLL_ERR_INTERNAL, "node segment holds %u ranks, expected %d",
                         header().size, size);
    return kSuccess;
}

}  // namespace gpucoll::intra

#include "intra/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

namespace gpucoll::intra {

namespace {
static_assert(sizeof(SegmentHeader) <= SharedSegment::kHeaderBytes);
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

#if defined(GPUCOLL_THREAD_SANITIZER)
namespace {
// The block of ThreadSanitizer keys of the segment with this inode, shared by
// every mapping of it in this process.
std::shared_ptr<std::byte[]> sync_block_for(uint64_t inode, size_t bytes) {
    static std::mutex mutex;
    static std::map<uint64_t, std::weak_ptr<std::byte[]>> blocks;
    std::lock_guard lock(mutex);
    std::weak_ptr<std::byte[]>& known = blocks[inode];
    if (auto block = known.lock()) return block;
    auto block = std::make_shared<std::byte[]>(bytes);
    known = block;
    return block;
}
}  // namespace
#endif

void* SharedSegment::sync_key(const void* flag) const {
    return sync_block_.get() +
           (static_cast<const std::byte*>(flag) - static_cast<std::byte*>(base_));
}

Status SharedSegment::map(int fd, size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return set_error(GPUCOLL_ERR_SYSTEM, "mapping the node's shared segment (%zu bytes): %s",
                         bytes, std::strerror(errno));
    base_ = p;
    bytes_ = bytes;
#if defined(GPUCOLL_THREAD_SANITIZER)
    struct stat st {};
    if (fstat(fd, &st) != 0)
        return set_error(GPUCOLL_ERR_SYSTEM, "fstat of the node's shared segment: %s",
                         std::strerror(errno));
    sync_block_ = sync_block_for(static_cast<uint64_t>(st.st_ino), bytes);
#endif
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

// shared_segment.h - the host-memory segment that the ranks of one node share
// per communicator: one slot per rank with its progress flag and the buffer
// descriptors it posted for recent calls.
//
// The segment is a memfd created by the node leader; the others open it
// through /proc/<leader pid>/fd/<fd> and the leader closes its descriptor once
// all have mapped it, so nothing ever appears in /dev/shm and the pages go
// away with the last mapping, crash or not.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/sanitizers.h"
#include "common/status.h"
#include "device/device.h"

namespace gpucoll::intra {

// A device buffer as a peer can reach it: the owner's allocation (by unique
// id and IPC handle) and the offset of the buffer inside it.
struct BufferDesc {
    uint64_t buffer_id = 0;  // 0: no buffer
    uint64_t base = 0;       // the allocation's address in the owner (same process: used directly)
    uint64_t size = 0;       // the allocation's size
    uint64_t offset = 0;
    uint32_t internal =
        0;  // 1: the communicator's own buffer (temp, copies), mapped per communicator
    IpcHandle handle{};
};

// What a rank posts for one call.
enum class PostKind : uint32_t {
    Accelerate = 1,  // my buffers are device memory, posted below
    Decline = 2,     // host buffers, ineligible call or a local failure: all decline
    Refuse = 3,      // my buffers do not fit the call: every rank fails it (unless one declined)
    Rebind = 4,      // my buffers are on another GPU than the communicator's: unless one
                     // declined or refused, every rank returns GPUCOLL_REBIND
};

// What a rank was asked to do: every rank compares the others' with its own
// before touching any peer's memory (a count that differs between ranks
// would otherwise make them read past each other's buffers).
struct CallSignature {
    int32_t coll, dtype, op, root;
    uint64_t bytes;  // call_bytes()
    bool operator==(const CallSignature&) const = default;
};

// Buffers a rank may post per call: the call's send and receive buffers, and
// its temporary device buffer (partial sums of ring reduce-scatter).
enum : int { kSendBuf = 0, kRecvBuf = 1, kTempBuf = 2, kPostedBuffers = 3 };

// A post's kind word: (call << 8) | PostKind. Only posts other than a
// decline write it (kind_word): a declined call writes nothing but the
// progress word, so a word that names an earlier call than the one read
// means that call was declined (NodeComm::kind_of).
constexpr uint64_t kind_word(uint64_t seq, PostKind kind) {
    return (seq << 8) | static_cast<uint64_t>(kind);
}

struct Post {
    uint64_t kind;  // kind_word of the call this post was last written for (0: none yet)
    CallSignature sig;
    BufferDesc buf[kPostedBuffers];
};

// Calls whose posts stay readable: a rank waits before it would overwrite a
// post that a peer may not have read yet.
// Deep enough that a rank rarely has to look at its peers' progress at all.
// A declined call on one node overwrites no post (kind_word), so it waits
// for nobody: a rank whose calls are all declined (a host-buffer bcast
// root) may run any number of calls ahead, and never reads its peers'
// progress (a cache line another core writes). Between nodes declines keep
// the window (local rank 0's verdict words).
constexpr uint64_t kPostDepth = 64;

// Progress word: (call sequence << kStepBits) | step. Posting call k sets it
// to k << kStepBits; steps inside the call count up from 1; kStepDone marks
// that this rank no longer touches any peer's memory for call k.
constexpr int kStepBits = 20;
constexpr uint64_t kStepDone = (uint64_t{1} << kStepBits) - 1;
constexpr uint64_t progress_word(uint64_t seq, uint64_t step) { return (seq << kStepBits) | step; }

struct alignas(128) RankSlot {
    std::atomic<uint64_t> progress;
    std::atomic<uint64_t> closed;  // 1: this rank has unmapped every peer's buffers (teardown)
    // Local rank 0 of a communicator that spans nodes: progress_word(call,
    // verdict code) once the nodes agreed on that call (for the ranks that
    // do not take part in the exchange themselves), one word per call like
    // the posts: a leader that declines decides at once and may run ahead,
    // but it cannot reuse call k's word before every rank has posted k + 1
    // (post() waits for that), so after reading what it needs.
    std::atomic<uint64_t> verdicts[kPostDepth];
    alignas(64) Post posts[kPostDepth];
};

// The host gate (gpucoll.h, gpucoll_host_gate_call) writes the same.
static_assert(kStepBits == GPUCOLL_GATE_STEP_BITS);

struct SegmentHeader {
    // Sequence number of a call a rank failed after posting (0: none). Every
    // rank fails that call and declines every later one.
    std::atomic<uint64_t> abort;
    uint32_t size;  // ranks
};

// The mapped segment: header, then `size` slots.
class SharedSegment {
public:
    SharedSegment() = default;
    SharedSegment(const SharedSegment&) = delete;
    SharedSegment& operator=(const SharedSegment&) = delete;
    ~SharedSegment();

    static size_t bytes_for(int size);

    // Leader: creates the memfd and maps it; fd() stays open until close_fd().
    Status create(int size);
    // Others: open the leader's fd through /proc and map it.
    Status attach(int leader_pid, int leader_fd, int size);
    void close_fd();

    int fd() const { return fd_; }
    bool mapped() const { return base_ != nullptr; }
    SegmentHeader& header() const { return *static_cast<SegmentHeader*>(base_); }
    // Every call reaches its slot through here (inline: host calls too).
    RankSlot& slot(int rank) const {
        return reinterpret_cast<RankSlot*>(static_cast<char*>(base_) + kHeaderBytes)[rank];
    }
    static constexpr size_t kHeaderBytes = 128;  // the header, then one slot per rank

    // Every flag of the segment (progress, closed, abort) is published and
    // read through these: release store, acquire load.
    void store_release(std::atomic<uint64_t>& flag, uint64_t value) const;
    uint64_t load_acquire(const std::atomic<uint64_t>& flag) const;

private:
    Status map(int fd, size_t bytes);
    void* base_ = nullptr;
    size_t bytes_ = 0;
    int fd_ = -1;
    // ThreadSanitizer tracks synchronisation by address, but ranks of one
    // process (threads, in the unit tests) map the segment at different
    // addresses: it would see no order between a flag's store and its load,
    // and report the buffers those ranks share at one address as races.
    // Under TSan each flag's release and acquire are also annotated on one
    // process-wide address per flag: this block, one per segment (by inode),
    // at the flag's offset. Unused otherwise.
    std::shared_ptr<std::byte[]> sync_block_;
    void* sync_key(const void* flag) const;
};

#if defined(GPUCOLL_THREAD_SANITIZER)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

inline void SharedSegment::store_release(std::atomic<uint64_t>& flag, uint64_t value) const {
#if defined(GPUCOLL_THREAD_SANITIZER)
    __tsan_release(sync_key(&flag));
#endif
    flag.store(value, std::memory_order_release);
}

inline uint64_t SharedSegment::load_acquire(const std::atomic<uint64_t>& flag) const {
    const uint64_t value = flag.load(std::memory_order_acquire);
#if defined(GPUCOLL_THREAD_SANITIZER)
    __tsan_acquire(sync_key(&flag));
#endif
    return value;
}

}  // namespace gpucoll::intra

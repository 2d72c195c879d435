// transport.h - the inter-node transport: one UCX context and worker per
// process, endpoints cached per peer process (by worker address) across
// communicators, tagged sends and receives with the memory type always
// declared. Built without UCX, create() fails and communicators that span
// nodes stay on the staged path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpucoll::inter {

enum class MemKind { Host, Cuda };

// One send or receive in flight. Owned by the caller; finished by
// Transport::test (done) or Transport::cancel.
struct Request {
    void* handle = nullptr;  // the transport's request (nullptr: completed at once)
    bool active = false;     // started and not yet finished
    bool is_recv = false;
    size_t expected = 0;  // receives: the bytes the message must carry
    // A send (or begun receive) cancelled before it completed: UCX may
    // still read (write) its buffer, which its owner must then never free
    // or reuse.
    bool abandoned = false;
};

class Endpoint;

class Transport {
public:
    // thread_multi: the worker may be used by several threads at once
    // (MPI_THREAD_MULTIPLE). GPUCOLL_ERR_UNSUPPORTED when built without UCX.
    // net_devices: UCX_NET_DEVICES for this context ("": UCX's choice).
    static Status create(bool thread_multi, const std::string& net_devices,
                         std::unique_ptr<Transport>* out);
    ~Transport();
    Transport(const Transport&) = delete;
    Transport& operator=(const Transport&) = delete;

    // This process's worker address, for peers to connect to.
    const std::vector<uint8_t>& address() const;
    // Whether device pointers of the cuda backend may be handed to the
    // transport (UCX reports CUDA memory support). Emu memory never is.
    bool cuda_memory() const;
    // "UCX 1.13.1, memory types: host" - for verbose output.
    const std::string& description() const;

    // The endpoint to the worker at address; created once per address.
    Status connect(const uint8_t* address, size_t bytes, Endpoint** out);
    // Whether every transport ep's lanes use can read device memory itself
    // (InfiniBand/RoCE with GPUDirect RDMA, cuda_ipc, cuda_copy), once the
    // endpoint is wired up; false for host-only transports (tcp, shared
    // memory), to which UCX 1.22 hands device pointers and fails (measured:
    // tcp send EIO), and where UCX cannot tell (before 1.14). *names: what
    // the endpoint uses, for verbose output.
    bool device_capable(Endpoint* ep, std::string* names);

    Status send(Endpoint* ep, uint64_t tag, const void* buf, size_t bytes, MemKind kind,
                Request* req);
    Status recv(uint64_t tag, uint64_t mask, void* buf, size_t bytes, MemKind kind, Request* req);
    // Without waiting: *done once req finished (then it is released). A
    // receive whose message does not carry exactly req->expected bytes fails.
    Status test(Request* req, bool* done);
    // Ends a receive that will never match; a send, or a receive whose
    // message had begun and cannot end (its sender unreachable), is only
    // released (req->abandoned: it had not completed; UCX may still read
    // or write its buffer).
    void cancel(Request* req);
    // UCX reported the peer of ep unreachable (its error handler ran: the
    // connection failed, or UCX's keepalive got no answer). Its sends fail;
    // receives from it, which match by tag on the worker, would wait on.
    bool failed(const Endpoint* ep) const;
    void progress();
    // Sleeps until the network has something for this worker, or timeout_ms
    // passes (no busy polling while a transfer waits: ranks that share cores
    // get them).
    void wait(int timeout_ms);

    struct Impl;

private:
    explicit Transport(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Tags: communicator id (16 bits) | call sequence (24) | step (12) | sender (12).
constexpr int kTagSrcBits = 12, kTagStepBits = 12, kTagSeqBits = 24;
constexpr uint32_t kMaxGroupSize = 1u << kTagSrcBits;
constexpr uint32_t kControlStep = (1u << kTagStepBits) - 1;  // abort messages
constexpr uint32_t kVerdictStep = kControlStep - 1;          // a call's verdicts between nodes
constexpr uint32_t kHelloStep = kControlStep - 2;            // a group's creation
// Steps below this one carry a call's data; the ones above are reserved.
constexpr uint32_t kDataSteps = kHelloStep;
constexpr uint64_t make_tag(uint32_t comm, uint64_t seq, uint32_t step, uint32_t src) {
    return (uint64_t{comm} << (kTagSeqBits + kTagStepBits + kTagSrcBits)) |
           ((seq & ((uint64_t{1} << kTagSeqBits) - 1)) << (kTagStepBits + kTagSrcBits)) |
           (uint64_t{step & kControlStep} << kTagSrcBits) | (src & (kMaxGroupSize - 1));
}
constexpr uint64_t kTagMatchAll = ~uint64_t{0};
// Any sequence and sender: the communicator and step must match.
constexpr uint64_t kTagMatchControl = (~uint64_t{0} << (kTagSeqBits + kTagStepBits + kTagSrcBits)) |
                                      (uint64_t{kControlStep} << kTagSrcBits);

// Calls released(p, bytes) before every range of this process's memory is
// unmapped (munmap, mremap, a MAP_FIXED mmap, shmdt, a brk shrink, from any
// thread and from inside free(); madvise too): UCX's memory hooks. install:
// install them if nobody has (they stay installed, also when the probe
// then fails); else only hooks already installed report (UCX 1.13's libucm
// installs them when it is loaded). True once a probe, on this thread, saw
// a munmap, a MAP_FIXED mmap, an mremap and the free() of a large malloc
// reported. False where that cannot be had: built without UCX, UCX's memory
// events off (UCX_MEM_EVENTS=no), no hooks installed and install false, an
// allocator that unmaps by system call (ASan's), a UCX that does not report
// one of them. One watcher per process.
bool watch_unmaps(void (*released)(const void* p, size_t bytes), bool install);
// The same probe again: the hooks still report (another library may have
// patched the same functions since).
bool unmaps_still_reported();

}  // namespace gpucoll::inter

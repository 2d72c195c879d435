// stream_comm.h - stream-ordered collectives on one node (gpucoll_stream_comm_*,
// MPIX_*_enqueue through libgpucoll_mpix): the whole call runs on the
// application's stream; the CPU only enqueues it.
//
// Each rank owns one device allocation, mapped by every peer at creation:
// two flag words (ready, done) and kSlots slots of chunk bytes. A call is a
// sequence of chunk steps, numbered g = 1, 2, ... across the communicator's
// calls (the same numbers on every rank: MPI requires the same sequence of
// calls with the same sizes). Step g, on the stream:
//   wait until every peer's done >= g - kSlots   (its reads of our slot g % kSlots ended)
//   copy this rank's part of the chunk into slot g % kSlots
//   ready := g
//   wait until the ready of every rank it reads from >= g
//   copy or reduce from the peers' slots into the receive buffer
//   done := g
// Nothing of a call waits for the CPU of any rank: no descriptor exchange
// per call, no host flag. A host thread per communicator (the monitor)
// watches for failures: its own stream's error, a peer's abort (flags at
// kAborted), a peer process that died while calls are in flight; it then
// writes kAborted into the failed rank's flags, which releases every wait
// on it (no hang), and the communicator reports the failure at the next
// call and in status().
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "device/device.h"
#include "gpucoll.h"
#include "intra/node_comm.h"

namespace gpucoll::stream {

// A flag value past every step: waits on it pass (below 2^63: CUDA's 64-bit
// stream waits compare cyclically).
constexpr uint64_t kAborted = uint64_t{1} << 62;

// One chunk step of a call, as this rank runs it (stream_schedule.cc).
struct Step {
    const char* in = nullptr;  // copied into the slot (nullptr: nothing)
    size_t in_bytes = 0;
    uint64_t begin = 0, end = 0;  // the bytes of the call's data the step covers
};

class StreamComm {
public:
    // Collective over bootstrap. component_reason: "" when the component
    // accelerates the communicator (registered, one node), else why not; a
    // communicator that cannot serve stream-ordered calls is still made
    // (every rank alike) and refuses them with the reason.
    static Status create(const gpucoll_bootstrap_t& bootstrap, const std::string& component_reason,
                         void* native_stream, std::unique_ptr<StreamComm>* out);
    // Waits until the stream has passed every call and the peers stopped
    // reading this rank's slots (bounded by the monitor), then frees.
    ~StreamComm();
    StreamComm(const StreamComm&) = delete;
    StreamComm& operator=(const StreamComm&) = delete;

    // Enqueues call on the stream and returns; GPUCOLL_ERR_UNSUPPORTED (with
    // the reason) for what the device path refuses, an error after a failure.
    Status enqueue(const gpucoll_call_t& call);
    // kSuccess, or the failure found on the stream (a peer's, ours).
    Status status();
    size_t chunk_bytes() const { return chunk_; }
    uint64_t steps_enqueued() const { return g_; }

    static constexpr int kSlots = 4;
    static constexpr size_t kReady = 0, kDone = 64;  // flag offsets in the allocation

private:
    StreamComm() = default;
    Status setup(const gpucoll_bootstrap_t& bootstrap, const std::string& reason, void* native);
    Status check_call(const gpucoll_call_t& call) const;
    Status check_buffer(const void* p, size_t bytes, const char* what) const;
    Status enqueue_step(const gpucoll_call_t& call, const Step& step);
    uint64_t* flag(int p, size_t which) const {
        return reinterpret_cast<uint64_t*>(base_[static_cast<size_t>(p)] + which);
    }
    char* slot(int p, uint64_t g) const {
        return base_[static_cast<size_t>(p)] + intra::NodeComm::kFlagBytes + (g % kSlots) * chunk_;
    }
    void monitor_loop(std::stop_token stop);
    void check_health();                               // monitor, under mutex_
    void declare_failed(int who, const std::string&);  // under mutex_
    bool peers_done(uint64_t g);                       // under mutex_

    Device* device_ = nullptr;
    int rank_ = 0, size_ = 0;
    std::string refusal_;  // not empty: every call is refused with it
    size_t chunk_ = 0;
    std::shared_ptr<Stream> stream_;  // the application's
    std::unique_ptr<Stream> watch_;   // the monitor's own
    intra::DeviceBuffer scratch_;
    std::vector<std::unique_ptr<IpcMapping>> mappings_;
    std::vector<char*> base_;  // every rank's allocation, as this process addresses it
    std::vector<pid_t> pids_;
    std::vector<const void*> srcs_;  // reduce sources, reused
    uint64_t* words_ = nullptr;      // pinned host copies of the peers' ready words
    uint64_t g_ = 0;                 // the last step enqueued
    uint64_t ticket_ = 0;            // the stream's marker behind the last call

    std::mutex mutex_;  // enqueue and the monitor
    Status failure_ = kSuccess;
    std::string failure_message_;
    std::condition_variable_any wake_;
    std::jthread monitor_;  // declared last: stopped first
};

// The steps of call for this rank (stream_schedule.cc): what it copies in,
// over which bytes of the call's data. total: bytes every rank stages.
size_t staged_bytes(const gpucoll_call_t& call, int size, size_t elem);
Step step_of(const gpucoll_call_t& call, int rank, int size, size_t elem, size_t chunk, uint64_t j);

}  // namespace gpucoll::stream

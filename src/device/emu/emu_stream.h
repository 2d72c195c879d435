// emu_stream.h - an ordered work queue of the emulated GPU.
//
// By default the queue runs on its own worker thread, so that code which
// forgets to synchronize reads stale results in tests, as it would on a GPU.
// GPUCOLL_EMU_INLINE_STREAMS=1 runs work inline at enqueue time (debug aid).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "device/device.h"

namespace gpucoll {

class EmuStream final : public Stream {
public:
    using Work = std::function<Status()>;

    // device: the emulated GPU whose work it queues.
    explicit EmuStream(bool run_inline, int device = 0);
    ~EmuStream() override;  // finishes queued work, then joins the worker
    EmuStream(const EmuStream&) = delete;
    EmuStream& operator=(const EmuStream&) = delete;

    // Runs work after everything enqueued before it; after a work item
    // failed, nothing more runs until synchronize() (as after a CUDA error).
    void enqueue(Work work);

    // Waits for all enqueued work; returns the first error since the last
    // synchronize (and sets its message on the calling thread).
    Status synchronize() override;
    Status query(bool* complete) override;
    // A marker is a work item that records its ticket when it runs.
    Status mark(uint64_t* ticket) override;
    Status reached(uint64_t ticket, bool* done) override;
    // Emu copies and reductions without a stream are synchronous: nothing
    // can be pending on a default stream.
    Status after_default_stream() override { return kSuccess; }

    bool runs_inline() const { return run_inline_; }
    int device() const { return device_; }

    // True when GPUCOLL_EMU_INLINE_STREAMS asks for inline streams.
    static bool inline_requested_by_environment();

private:
    void worker_loop();
    void run(Work& work);  // caller holds no lock

    const bool run_inline_;
    const int device_;
    std::mutex mutex_;
    std::condition_variable work_ready_;
    std::condition_variable idle_;
    std::deque<Work> queue_;
    bool busy_ = false;
    bool stopping_ = false;
    Status first_error_ = kSuccess;
    std::string first_error_message_;
    uint64_t next_ticket_ = 1;                 // enqueueing thread only
    std::atomic<uint64_t> reached_ticket_{0};  // written by the worker
    std::atomic<bool> failed_{false};          // work failed since the last synchronize
    std::thread worker_;
};

}  // namespace gpucoll

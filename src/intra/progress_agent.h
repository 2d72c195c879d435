// progress_agent.h - the threads that advance nonblocking calls while the
// application computes.
//
// A nonblocking collective on the accelerated path runs once every rank has
// posted it. Without help it advances only inside MPI calls (MPI_Test,
// MPI_Wait, Open MPI's progress engine), so a rank that computes between
// MPI_Iallreduce and MPI_Wait overlaps nothing. The agent gives each
// communicator with nonblocking calls a thread of its own that advances its
// queue (NodeComm::progress) whenever it can take the communicator's lock.
// One thread per communicator: a call runs as a sequence of waits for the
// peers' steps, and ranks may start calls on two communicators in opposite
// orders (legal for nonblocking collectives), so a single thread running
// one call at a time could wait for a peer that waits for it on the other
// communicator. The threads never call MPI: what they run is shared-memory
// flags, IPC copies and device reductions. Everything that enters a
// NodeComm holds its lock (recursive: a wait inside a call may advance the
// queue again); threads of an MPI_THREAD_MULTIPLE program calling on
// different communicators never wait for each other.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/immortal.h"

namespace gpucoll::intra {

class NodeComm;

class ProgressAgent {
public:
    // Never destroyed: at exit, and in a child created by fork() (which has
    // the threads' state but not the threads), there is nothing to stop or
    // join; the threads of communicators still alive end with the process.
    static ProgressAgent& instance();

    // Off: no thread. Eager: it takes a call over as soon as the application
    // stops polling. Lazy: only after 10-20 ms without polling (where
    // cores are short: a rescue against calls that wait for each other, not
    // a source of overlap).
    enum class Mode { Off, Eager, Lazy };

    // c has calls in flight: its thread (started at its first call)
    // advances them until its queue is empty.
    void watch(NodeComm* c, Mode mode);
    // c goes away: stops and joins its thread. Call it without holding c's
    // lock; once it returns, the agent no longer touches c.
    void forget(NodeComm* c);
    static bool on_agent_thread();
    // The application polls (MPI_Test, MPI_Wait): it advances its calls
    // itself, with no hand-over, so the threads stay out of its way while
    // it keeps polling, and take over when it starts a call or stops
    // polling (computes).
    void note_poll() { polls_.fetch_add(1, std::memory_order_relaxed); }

private:
    friend class Immortal<ProgressAgent>;
    struct Runner;
    ProgressAgent() = default;
    ~ProgressAgent() = delete;  // see instance()
    void loop(Runner& r);

    std::mutex mutex_;  // the runners and their fields
    std::vector<std::unique_ptr<Runner>> runners_;
    std::atomic<uint64_t> polls_{0};
};

}  // namespace gpucoll::intra

// progress_agent.h - the thread that advances nonblocking calls while the
// application computes.
//
// A nonblocking collective on the accelerated path runs once every rank has
// posted it. Without help it advances only inside MPI calls (MPI_Test,
// MPI_Wait, Open MPI's progress engine), so a rank that computes between
// MPI_Iallreduce and MPI_Wait overlaps nothing. The agent is one thread per
// process that advances the queues of the communicators with calls in
// flight (NodeComm::progress) whenever it can take their lock. It never
// calls MPI: what it runs is shared-memory flags, IPC copies and device
// reductions. Everything that enters a NodeComm holds that communicator's
// lock (recursive: a wait inside a call advances the other queues; one lock
// per communicator, so threads of an MPI_THREAD_MULTIPLE program calling on
// different communicators never wait for each other).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace gpucoll::intra {

class NodeComm;

class ProgressAgent {
public:
    static ProgressAgent& instance();

    // c has calls in flight: advance them until its queue is empty. Starts
    // the thread at the first call.
    void watch(NodeComm* c);
    // c goes away: once this returns, the agent no longer touches it. Call
    // it without holding c's lock.
    void forget(NodeComm* c);
    // From a wait inside a call that the agent runs: the other queues (in
    // place of Open MPI's progress, which only the application's threads
    // may call).
    void progress_others(const NodeComm* except);
    static bool on_agent_thread();
    // The application polls (MPI_Test, MPI_Wait): it advances its calls
    // itself, with no hand-over, so the agent stays out of its way until the
    // application starts another call without polling after it (computes).
    void note_poll() { polls_.fetch_add(1, std::memory_order_relaxed); }

    ~ProgressAgent();

private:
    ProgressAgent() = default;
    void loop();
    // Advances c's queue if its lock is free; true when c has calls left.
    bool advance(NodeComm* c);
    bool advance_all();  // one pass over the watched queues; true when some remain

    std::mutex mutex_;  // everything below
    std::condition_variable changed_;
    std::vector<NodeComm*> watched_;
    std::vector<NodeComm*> in_use_;  // being advanced by the agent (nested: several)
    bool stop_ = false;
    std::thread thread_;
    uint64_t starts_ = 0;          // calls watched so far
    uint64_t polls_at_start_ = 0;  // polls_ when the last one was
    std::atomic<uint64_t> polls_{0};
};

}  // namespace gpucoll::intra

#include "intra/progress_agent.h"

#include <algorithm>
#include <chrono>

#include "intra/node_comm.h"

namespace gpucoll::intra {

namespace {
thread_local bool t_on_agent = false;
// How long the agent rests after a pass that found calls still waiting for
// a peer's post: short against a collective, long enough not to take a
// core from the application (ranks often share cores with their agents).
// While the application polls, the rest doubles up to kMaxNap: it advances
// its calls itself, and an agent that wakes often takes CPU time from it
// (measured on a 2-core VM with 4 ranks: 16 KiB MPI_Iallreduce + MPI_Wait
// up to 3x slower with a 20 us nap throughout). A new call ends any rest.
constexpr auto kMinNap = std::chrono::microseconds(20);
constexpr auto kMaxNap = std::chrono::microseconds(320);
}  // namespace

ProgressAgent& ProgressAgent::instance() {
    static ProgressAgent agent;
    return agent;
}

bool ProgressAgent::on_agent_thread() { return t_on_agent; }

ProgressAgent::~ProgressAgent() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void ProgressAgent::watch(NodeComm* c) {
    {
        std::lock_guard lock(mutex_);
        if (std::find(watched_.begin(), watched_.end(), c) == watched_.end()) watched_.push_back(c);
        ++starts_;
        polls_at_start_ = polls_.load(std::memory_order_relaxed);
        if (!thread_.joinable() && !stop_) thread_ = std::thread([this] { loop(); });
    }
    changed_.notify_all();
}

void ProgressAgent::forget(NodeComm* c) {
    std::unique_lock lock(mutex_);
    watched_.erase(std::remove(watched_.begin(), watched_.end(), c), watched_.end());
    changed_.wait(lock,
                  [&] { return std::find(in_use_.begin(), in_use_.end(), c) == in_use_.end(); });
}

bool ProgressAgent::advance(NodeComm* c) {
    {
        std::lock_guard lock(mutex_);
        if (std::find(watched_.begin(), watched_.end(), c) == watched_.end()) return false;
        in_use_.push_back(c);
    }
    bool remaining = true;
    {
        // The application's threads have priority: one that holds the lock
        // (a blocking call, a test) advances the same queue.
        std::unique_lock comm(c->lock(), std::try_to_lock);
        if (comm.owns_lock()) remaining = !c->progress();
    }
    {
        std::lock_guard lock(mutex_);
        in_use_.erase(std::find(in_use_.begin(), in_use_.end(), c));
        if (!remaining)
            watched_.erase(std::remove(watched_.begin(), watched_.end(), c), watched_.end());
    }
    changed_.notify_all();
    return remaining;
}

bool ProgressAgent::advance_all() {
    std::vector<NodeComm*> now;
    {
        std::lock_guard lock(mutex_);
        now = watched_;
    }
    bool remaining = false;
    for (NodeComm* c : now) remaining = advance(c) || remaining;
    return remaining;
}

void ProgressAgent::progress_others(const NodeComm* except) {
    std::vector<NodeComm*> now;
    {
        std::lock_guard lock(mutex_);
        now = watched_;
    }
    for (NodeComm* c : now)
        if (c != except) (void)advance(c);
}

void ProgressAgent::loop() {
    t_on_agent = true;
    auto nap = kMinNap;
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [this] { return stop_ || !watched_.empty(); });
        if (stop_) return;
        // A new call, or the end of a nap, whichever comes first.
        const uint64_t starts = starts_;
        auto rest = [&] {
            changed_.wait_for(lock, nap, [&] { return stop_ || starts_ != starts; });
        };
        if (polls_.load(std::memory_order_relaxed) != polls_at_start_) {
            // The application polled since it started its last call: it
            // advances its calls itself (MPI_Wait, MPI_Test).
            rest();
            nap = std::min(2 * nap, kMaxNap);
            continue;
        }
        nap = kMinNap;
        lock.unlock();
        const bool remaining = advance_all();
        lock.lock();
        if (remaining) rest();
    }
}

}  // namespace gpucoll::intra

#include "intra/progress_agent.h"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>

#include "intra/node_comm.h"

namespace gpucoll::intra {

namespace {
thread_local bool t_on_agent = false;
// How long a thread rests after a pass that found calls still waiting for
// a peer's post: short against a collective (the threads run where every
// process has a core to spare: coll_gpucoll_progress_thread auto).
// While the application polls, the rest doubles up to kMaxNap: it advances
// its calls itself, and a thread that wakes often takes CPU time from it
// (measured on a 2-core VM with 4 ranks: 16 KiB MPI_Iallreduce + MPI_Wait
// up to 3x slower with a 20 us nap throughout). A new call ends any rest.
constexpr auto kMinNap = std::chrono::microseconds(10);
constexpr auto kMaxNap = std::chrono::microseconds(320);
// Mode::Lazy: the thread looks once per kLazyNap without being woken, and
// goes idle after kLazyLinger looks with nothing to do. On the 2-core VM
// with 4 ranks, a wake-up per call made 4 KiB MPI_Iallreduce + MPI_Wait
// 7-9x slower and a look per millisecond 2-3x; a look per 10 ms is within
// noise of no thread (docs/performance.md, "Design choices the numbers
// decided").
constexpr auto kLazyNap = std::chrono::milliseconds(10);
constexpr unsigned kLazyLinger = 100;
}  // namespace

struct ProgressAgent::Runner {
    NodeComm* comm = nullptr;
    std::condition_variable changed;
    uint64_t starts = 0;      // calls started so far
    uint64_t polls_seen = 0;  // polls_ at the last start, or at the thread's last look
    bool lazy = false;
    bool idle = false;  // waiting with no call in flight: only a start wakes it
    bool busy = false;  // inside its communicator's progress (mutex_ released)
    bool stop = false;
    std::thread thread;
};

ProgressAgent& ProgressAgent::instance() {
    static Immortal<ProgressAgent> agent;
    return *agent;
}

bool ProgressAgent::on_agent_thread() { return t_on_agent; }

void ProgressAgent::watch(NodeComm* c, Mode mode) {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(runners_.begin(), runners_.end(),
                           [c](const std::unique_ptr<Runner>& r) { return r->comm == c; });
    Runner* r = nullptr;
    if (it == runners_.end()) {
        runners_.push_back(std::make_unique<Runner>());
        r = runners_.back().get();
        r->comm = c;
        r->thread = std::thread([this, r] { loop(*r); });
    } else {
        r = it->get();
    }
    ++r->starts;
    r->lazy = mode == Mode::Lazy;
    // Eager: a new call is taken at once. Lazy: as if the application had
    // just polled, so the thread first waits a whole look.
    r->polls_seen = polls_.load(std::memory_order_relaxed) - (r->lazy ? 1 : 0);
    if (!r->lazy || r->idle) r->changed.notify_all();
}

void ProgressAgent::forget(NodeComm* c) {
    std::unique_ptr<Runner> gone;
    {
        std::lock_guard lock(mutex_);
        auto it = std::find_if(runners_.begin(), runners_.end(),
                               [c](const std::unique_ptr<Runner>& r) { return r->comm == c; });
        if (it == runners_.end()) return;
        gone = std::move(*it);
        runners_.erase(it);
        gone->stop = true;
    }
    gone->changed.notify_all();
    gone->thread.join();
}

void ProgressAgent::loop(Runner& r) {
    t_on_agent = true;
    // Linux lets a timed wait of a normal thread end up to 50 us late: as
    // long as a short compute phase. The thread's rests are on the scale of
    // the calls it serves.
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    auto nap = kMinNap;
    uint64_t served = 0;  // starts seen when the queue was last found empty
    unsigned quiet = 0;   // lazy: looks in a row with nothing to do
    std::unique_lock lock(mutex_);
    for (;;) {
        if (r.lazy && quiet < kLazyLinger) {
            r.changed.wait_for(lock, kLazyNap, [&] { return r.stop; });
            if (r.stop) return;
            if (r.starts == served) {
                ++quiet;
                continue;
            }
        } else {
            r.idle = true;
            r.changed.wait(lock, [&] { return r.stop || r.starts != served; });
            r.idle = false;
            if (r.stop) return;
        }
        quiet = 0;
        const uint64_t starts = r.starts;
        auto rest = [&] {  // lazy: the next look is the rest
            if (!r.lazy)
                r.changed.wait_for(lock, nap, [&] { return r.stop || r.starts != starts; });
        };
        const uint64_t polls = polls_.load(std::memory_order_relaxed);
        if (polls != r.polls_seen) {
            // The application polled since the last look (MPI_Wait,
            // MPI_Test): it advances its calls itself. Once it stops
            // polling for a whole rest (it computes), the thread takes over.
            r.polls_seen = polls;
            rest();
            nap = std::min(2 * nap, kMaxNap);
            continue;
        }
        nap = kMinNap;
        r.busy = true;
        lock.unlock();
        bool empty = false, tried = false;
        {
            // The application's threads have priority: one that holds the
            // lock (a blocking call, a test) advances the same queue.
            std::unique_lock comm(r.comm->lock(), std::try_to_lock);
            if (comm.owns_lock()) {
                tried = true;
                empty = r.comm->progress();
            }
        }
        lock.lock();
        r.busy = false;
        if (r.stop) return;
        if (tried && empty)
            served = starts;  // sleep until the next call (unless one came meanwhile)
        else
            rest();
    }
}

}  // namespace gpucoll::intra

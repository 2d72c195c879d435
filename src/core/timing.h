// timing.h - where the time of a collective goes, step by step: a per-process
// table of nanoseconds and occurrences per collective and step, filled only
// while timing is on (coll_gpucoll_timing; off costs one relaxed load per
// step). gpucoll_timing_report() prints it; docs/performance.md reads it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "gpucoll.h"

namespace gpucoll::timing {

// Steps of a call in the order they happen. Sub-steps (kResolve, kPeerWait,
// kEnqueue) lie inside kAlgorithm and are shown indented under it.
enum Step : int {
    kClassify,   // the component asks whether the buffers are device memory
    kEnter,      // lock, current GPU, calls started before this one, rebind
    kSelect,     // the algorithm for this size
    kCheck,      // pointer queries of the user's buffers (one per buffer)
    kDescribe,   // IPC descriptors of the buffers (cached by allocation)
    kScratch,    // one-shot: wait for the slot, copy the input into it
    kPost,       // the post (and its window wait)
    kAgree,      // wait for every peer's post, the verdict
    kOrder,      // the application's default-stream work comes first
    kAlgorithm,  // the algorithm: the three below and the rest of its steps
    kResolve,    //   peers' buffers through the IPC cache
    kPeerWait,   //   waits for peers' steps (host flags, or enqueued device waits)
    kDevice,     //   copies and reduction kernels (enqueue; the run itself when synchronous)
    kFinish,     // the end: the stream's work, the last flags
    kTail,       // copy-out, counters
    kCore,       // everything from the core's entry to its return
    kDecline,    // a declined call (staged by size or by a peer), whole
    kStageCopy,  // staged path: one copy between device and host
    kStepCount
};

const char* step_name(Step s);

namespace detail {
extern std::atomic<bool> g_on;
}
inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }
void set_on(bool on);
uint64_t now_ns();
// coll: GPUCOLL_COLL_COUNT for steps that belong to no one collective.
void add(int coll, Step step, uint64_t ns);
void reset();
std::string report();

// Times its scope into (coll, step) while timing is on.
class Scope {
public:
    Scope(int coll, Step step) : coll_(coll), step_(step), t0_(on() ? now_ns() : 0) {}
    ~Scope() { stop(); }
    // Ends the step here (once; the destructor then adds nothing).
    void stop() {
        if (t0_ != 0) add(coll_, step_, now_ns() - t0_);
        t0_ = 0;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

private:
    int coll_;
    Step step_;
    uint64_t t0_;
};

}  // namespace gpucoll::timing

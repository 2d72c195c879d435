// counters.h - per-process counters of which path each collective took.
#pragma once

#include <atomic>
#include <cstdint>

#include "gpucoll.h"

namespace gpucoll {

namespace counters_detail {
// Per-process counters, updated without a lock (counters.cc says how).
extern gpucoll_counters_t g_counters;
extern std::atomic<const char*> g_last_algorithm;
// The last call: GPUCOLL_LAST_CALL_WORD(coll, path, form), with
// GPUCOLL_LAST_CALL_DETAILED where g_counters' other last_* fields and the
// algorithm belong to it (gpucoll's own paths). A delegated call writes
// only this word (the host gate too): one store. Atomic builtins.
extern uint64_t g_last_call;
}  // namespace counters_detail

struct CallRecord {
    gpucoll_coll_t coll;
    gpucoll_path_t path;
    uint64_t bytes_staged = 0;
    uint64_t bytes_peer = 0;
    uint64_t sync_rounds = 0;
    const char* algorithm = "";
    uint64_t bytes_inter = 0;
    gpucoll_form_t form = GPUCOLL_FORM_BLOCKING;
    bool planned = false;  // a persistent start that reused its plan's setup
};

void counters_record(const CallRecord& r);
// Blocking host calls of one communicator handed to the host module: the
// thread that makes a collective call on a communicator is the only one
// doing so at that time (MPI forbids concurrent collective calls on one
// communicator), so it counts them with plain adds, where the process-wide
// counters need locked instructions. Registered while it lives:
// counters_get adds it in; its counts join the process's when it ends.
// counters_reset, from any thread, moves a baseline (under the registry's
// lock) and never writes the owner's counts, so a reset racing with a call
// cannot be undone by it.
class DelegatedTally {
public:
    DelegatedTally();
    ~DelegatedTally();
    DelegatedTally(const DelegatedTally&) = delete;
    DelegatedTally& operator=(const DelegatedTally&) = delete;

    // Counts in calls (GPUCOLL_COLL_COUNT entries, outliving the tally: the
    // host gate's), or in its own array.
    explicit DelegatedTally(uint64_t* calls);
    void add(gpucoll_coll_t coll) {
        std::atomic_ref<uint64_t> n(calls_[coll]);
        n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    // Calls since the last reset. Under the registry's lock (counters.cc).
    uint64_t get(int coll) const {
        auto& n = const_cast<uint64_t&>(calls_[coll]);  // only read (atomic_ref<const T>: C++26)
        return std::atomic_ref<uint64_t>(n).load(std::memory_order_relaxed) - base_[coll];
    }
    void reset();                                   // under the registry's lock
    DelegatedTally* next() const { return next_; }  // the registry's list (counters.cc)

private:
    void link();  // into the registry (counters.cc)
    uint64_t own_[GPUCOLL_COLL_COUNT] = {};
    uint64_t* calls_ = own_;                  // written by the calling thread only
    uint64_t base_[GPUCOLL_COLL_COUNT] = {};  // calls_ at the last reset (registry's lock)
    DelegatedTally* prev_ = nullptr;
    DelegatedTally* next_ = nullptr;
};

// The same for a blocking call handed to the host module untouched: every
// host-buffer call, so inline and short. tally: its communicator's (no
// locked instruction), or nullptr (the process's counters).
inline void counters_record_delegated(gpucoll_coll_t coll, DelegatedTally* tally = nullptr) {
    using namespace counters_detail;
    if (coll < 0 || coll >= GPUCOLL_COLL_COUNT) return;
    constexpr auto relaxed = std::memory_order_relaxed;
    if (tally != nullptr) {
        tally->add(coll);
    } else {
        std::atomic_ref<uint64_t>(g_counters.calls[coll][GPUCOLL_PATH_DELEGATED])
            .fetch_add(1, relaxed);
        std::atomic_ref<uint64_t>(g_counters.forms[GPUCOLL_FORM_BLOCKING][GPUCOLL_PATH_DELEGATED])
            .fetch_add(1, relaxed);
    }
    __atomic_store_n(&g_last_call,
                     GPUCOLL_LAST_CALL_WORD(coll, GPUCOLL_PATH_DELEGATED, GPUCOLL_FORM_BLOCKING),
                     __ATOMIC_RELAXED);
}
void counters_get(gpucoll_counters_t* out);
void counters_reset();

}  // namespace gpucoll

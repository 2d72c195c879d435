#include "core/counters.h"

#include <atomic>
#include <cstring>
#include <mutex>

namespace gpucoll {

namespace counters_detail {

// Per-process counters, updated without a lock (every collective call of
// every thread records one, host-buffer calls included: a mutex there cost
// ~110 instructions a call). Each field is updated atomically; a reader may
// see the fields of two calls mixed, which is fine for diagnostics.
gpucoll_counters_t g_counters{};
// The last call's algorithm, copied (under a lock) only when the pointer
// differs from the previous call's: a run of host-buffer calls, all
// "delegated", copies nothing. The copy outlives the component's literals.
std::atomic<const char*> g_last_algorithm{""};
uint64_t g_last_call = GPUCOLL_LAST_CALL_DETAILED;

}  // namespace counters_detail

namespace {

using counters_detail::g_counters;
using counters_detail::g_last_algorithm;
std::mutex g_name_mutex;

// The live communicators' tallies (DelegatedTally), a list linked through
// them (nothing to destroy at exit), under g_tally_mutex.
std::mutex g_tally_mutex;
DelegatedTally* g_tallies = nullptr;
char g_last_name[sizeof(gpucoll_counters_t::last_algorithm)] = "";

void add(uint64_t& field, uint64_t v) {
    if (v != 0) std::atomic_ref<uint64_t>(field).fetch_add(v, std::memory_order_relaxed);
}
template <typename T>
void put(T& field, T v) {
    std::atomic_ref<T>(field).store(v, std::memory_order_relaxed);
}
template <typename T>
T get(T& field) {
    return std::atomic_ref<T>(field).load(std::memory_order_relaxed);
}

// The last call's algorithm. A plain load first: runs of calls with one
// algorithm (host calls, all "delegated") pay no locked instruction here.
void note_algorithm(const char* a) {
    if (g_last_algorithm.load(std::memory_order_relaxed) != a &&
        g_last_algorithm.exchange(a, std::memory_order_relaxed) != a) {
        std::lock_guard<std::mutex> lock(g_name_mutex);
        const char* latest = g_last_algorithm.load(std::memory_order_relaxed);  // another thread's
        const size_t n = strnlen(latest, sizeof g_last_name - 1);
        std::memcpy(g_last_name, latest, n);
        g_last_name[n] = '\0';
    }
}

// The last call's fields (read by tests and gpucoll_bench).
inline void note_last(gpucoll_coll_t coll, gpucoll_path_t path, gpucoll_form_t form,
                      uint64_t bytes_peer, uint64_t sync_rounds, uint64_t bytes_inter,
                      const char* algorithm) {
    put(g_counters.last_bytes_peer, bytes_peer);
    put(g_counters.last_sync_rounds, sync_rounds);
    put(g_counters.last_bytes_inter, bytes_inter);
    note_algorithm(algorithm);
    __atomic_store_n(&counters_detail::g_last_call,
                     GPUCOLL_LAST_CALL_WORD(coll, path, form) | GPUCOLL_LAST_CALL_DETAILED,
                     __ATOMIC_RELAXED);
}

}  // namespace

void counters_record(const CallRecord& r) {
    if (r.coll < 0 || r.coll >= GPUCOLL_COLL_COUNT || r.path < 0 || r.path >= GPUCOLL_PATH_COUNT ||
        r.form < 0 || r.form >= GPUCOLL_FORM_COUNT)
        return;
    add(g_counters.calls[r.coll][r.path], 1);
    add(g_counters.forms[r.form][r.path], 1);
    add(g_counters.bytes_staged, r.bytes_staged);
    add(g_counters.bytes_peer, r.bytes_peer);
    add(g_counters.sync_rounds, r.sync_rounds);
    add(g_counters.bytes_inter, r.bytes_inter);
    if (r.planned) add(g_counters.planned_starts, 1);
    note_last(r.coll, r.path, r.form, r.bytes_peer, r.sync_rounds, r.bytes_inter,
              r.algorithm != nullptr ? r.algorithm : "");
}

DelegatedTally::DelegatedTally(uint64_t* calls) : calls_(calls) { link(); }

DelegatedTally::DelegatedTally() { link(); }

void DelegatedTally::link() {  // calls_ set before others can see it
    std::lock_guard lock(g_tally_mutex);
    next_ = g_tallies;
    if (next_ != nullptr) next_->prev_ = this;
    g_tallies = this;
}

DelegatedTally::~DelegatedTally() {
    std::lock_guard lock(g_tally_mutex);
    (prev_ != nullptr ? prev_->next_ : g_tallies) = next_;
    if (next_ != nullptr) next_->prev_ = prev_;
    for (int k = 0; k < GPUCOLL_COLL_COUNT; ++k) {
        gpucoll::add(g_counters.calls[k][GPUCOLL_PATH_DELEGATED], get(k));  // not this->add
        gpucoll::add(g_counters.forms[GPUCOLL_FORM_BLOCKING][GPUCOLL_PATH_DELEGATED], get(k));
    }
}

void DelegatedTally::reset() {
    for (int k = 0; k < GPUCOLL_COLL_COUNT; ++k)
        base_[k] = std::atomic_ref<uint64_t>(calls_[k]).load(std::memory_order_relaxed);
}

void counters_get(gpucoll_counters_t* out) {
    gpucoll_counters_t c{};
    {
        std::lock_guard lock(g_tally_mutex);
        for (int k = 0; k < GPUCOLL_COLL_COUNT; ++k)
            for (int p = 0; p < GPUCOLL_PATH_COUNT; ++p)
                c.calls[k][p] = get(g_counters.calls[k][p]);
        for (int f = 0; f < GPUCOLL_FORM_COUNT; ++f)
            for (int p = 0; p < GPUCOLL_PATH_COUNT; ++p)
                c.forms[f][p] = get(g_counters.forms[f][p]);
        for (const DelegatedTally* t = g_tallies; t != nullptr; t = t->next()) {
            for (int k = 0; k < GPUCOLL_COLL_COUNT; ++k) {
                c.calls[k][GPUCOLL_PATH_DELEGATED] += t->get(k);
                c.forms[GPUCOLL_FORM_BLOCKING][GPUCOLL_PATH_DELEGATED] += t->get(k);
            }
        }
    }
    c.bytes_staged = get(g_counters.bytes_staged);
    c.bytes_peer = get(g_counters.bytes_peer);
    c.bytes_inter = get(g_counters.bytes_inter);
    c.sync_rounds = get(g_counters.sync_rounds);
    c.planned_starts = get(g_counters.planned_starts);
    const uint64_t last = __atomic_load_n(&counters_detail::g_last_call, __ATOMIC_RELAXED);
    c.last_coll = static_cast<gpucoll_coll_t>(last & 0xff);
    c.last_path = static_cast<gpucoll_path_t>((last >> 8) & 0xff);
    c.last_form = static_cast<gpucoll_form_t>((last >> 16) & 0xff);
    if ((last & GPUCOLL_LAST_CALL_DETAILED) != 0) {
        c.last_bytes_peer = get(g_counters.last_bytes_peer);
        c.last_bytes_inter = get(g_counters.last_bytes_inter);
        c.last_sync_rounds = get(g_counters.last_sync_rounds);
        std::lock_guard<std::mutex> lock(g_name_mutex);
        std::memcpy(c.last_algorithm, g_last_name, sizeof c.last_algorithm);
    } else {  // a delegated call: the word is all there is
        std::strncpy(c.last_algorithm, "delegated", sizeof c.last_algorithm - 1);
    }
    *out = c;
}

void counters_reset() {
    {
        std::lock_guard lock(g_tally_mutex);
        for (DelegatedTally* t = g_tallies; t != nullptr; t = t->next()) t->reset();
    }
    for (auto& row : g_counters.calls)
        for (auto& v : row) put(v, uint64_t{0});
    for (auto& row : g_counters.forms)
        for (auto& v : row) put(v, uint64_t{0});
    for (uint64_t* f :
         {&g_counters.bytes_staged, &g_counters.bytes_peer, &g_counters.bytes_inter,
          &g_counters.sync_rounds, &g_counters.planned_starts, &g_counters.last_bytes_peer,
          &g_counters.last_bytes_inter, &g_counters.last_sync_rounds})
        put(*f, uint64_t{0});
    std::lock_guard<std::mutex> lock(g_name_mutex);
    g_last_algorithm.store("", std::memory_order_relaxed);
    g_last_name[0] = '\0';
    __atomic_store_n(&counters_detail::g_last_call, GPUCOLL_LAST_CALL_DETAILED, __ATOMIC_RELAXED);
}

}  // namespace gpucoll

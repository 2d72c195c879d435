#include "core/timing.h"

#include <time.h>

#include <cstdio>

namespace gpucoll::timing {

namespace detail {
std::atomic<bool> g_on{false};
}

namespace {

struct Cell {
    std::atomic<uint64_t> ns{0};
    std::atomic<uint64_t> n{0};
};
// One row per collective and one for steps that belong to none.
Cell g_table[GPUCOLL_COLL_COUNT + 1][kStepCount];

constexpr const char* kNames[kStepCount] = {
    "classify", "enter",  "select", "check",     "describe", "scratch",
    "post",     "agree",  "order",  "algorithm", "resolve",  "peer-wait",
    "device",   "finish", "tail",   "core",      "declined", "stage-copy"};

}  // namespace

const char* step_name(Step s) { return s >= 0 && s < kStepCount ? kNames[s] : "?"; }

void set_on(bool on) { detail::g_on.store(on, std::memory_order_relaxed); }

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    // Never 0: Scope reads 0 as "timing was off when the scope began".
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec) + 1;
}

void add(int coll, Step step, uint64_t ns) {
    if (coll < 0 || coll > GPUCOLL_COLL_COUNT || step < 0 || step >= kStepCount) return;
    Cell& c = g_table[coll][step];
    c.ns.fetch_add(ns, std::memory_order_relaxed);
    c.n.fetch_add(1, std::memory_order_relaxed);
}

void reset() {
    for (auto& row : g_table)
        for (Cell& c : row) {
            c.ns.store(0, std::memory_order_relaxed);
            c.n.store(0, std::memory_order_relaxed);
        }
}

// One block per collective that ran: each step's mean in microseconds per
// occurrence and its count ("x N" where a step ran other than once a call).
std::string report() {
    std::string out;
    char line[256];
    auto cell = [](int coll, int s, double* us) {
        const uint64_t n = g_table[coll][s].n.load(std::memory_order_relaxed);
        *us = n == 0 ? 0
                     : static_cast<double>(g_table[coll][s].ns.load(std::memory_order_relaxed)) /
                           static_cast<double>(n) / 1000.0;
        return n;
    };
    for (int coll = 0; coll <= GPUCOLL_COLL_COUNT; ++coll) {
        bool any = false;
        for (int s = 0; s < kStepCount && !any; ++s)
            any = g_table[coll][s].n.load(std::memory_order_relaxed) != 0;
        if (!any) continue;
        double core_us = 0;
        const uint64_t calls = cell(coll, kCore, &core_us);
        if (coll == GPUCOLL_COLL_COUNT)
            snprintf(line, sizeof line, "staging (any collective):\n");
        else
            snprintf(line, sizeof line, "%s: %llu accelerated calls, %.2f us each in the core\n",
                     gpucoll_coll_name(static_cast<gpucoll_coll_t>(coll)),
                     static_cast<unsigned long long>(calls), core_us);
        out += line;
        for (int s = 0; s < kStepCount; ++s) {
            if (s == kCore) continue;
            double us = 0;
            const uint64_t n = cell(coll, s, &us);
            if (n == 0) continue;
            const bool sub = s == kResolve || s == kPeerWait || s == kDevice;
            snprintf(line, sizeof line, "  %s%-12s %9.2f us  x %llu%s\n", sub ? "  " : "",
                     kNames[s], us, static_cast<unsigned long long>(n),
                     calls != 0 && n != calls ? " (not once a call)" : "");
            out += line;
        }
    }
    return out;
}

}  // namespace gpucoll::timing

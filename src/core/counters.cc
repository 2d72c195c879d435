#include "core/counters.h"

#include <cstring>
#include <mutex>

namespace gpucoll {

namespace {
std::mutex g_mutex;
gpucoll_counters_t g_counters{};
}  // namespace

void counters_record(const CallRecord& r) {
    if (r.coll < 0 || r.coll >= GPUCOLL_COLL_COUNT || r.path < 0 || r.path >= GPUCOLL_PATH_COUNT ||
        r.form < 0 || r.form >= GPUCOLL_FORM_COUNT)
        return;
    std::lock_guard<std::mutex> lock(g_mutex);
    g_counters.calls[r.coll][r.path]++;
    g_counters.forms[r.form][r.path]++;
    g_counters.bytes_staged += r.bytes_staged;
    g_counters.bytes_peer += r.bytes_peer;
    g_counters.sync_rounds += r.sync_rounds;
    g_counters.bytes_inter += r.bytes_inter;
    if (r.planned) g_counters.planned_starts++;
    g_counters.last_coll = r.coll;
    g_counters.last_path = r.path;
    g_counters.last_form = r.form;
    g_counters.last_bytes_peer = r.bytes_peer;
    g_counters.last_sync_rounds = r.sync_rounds;
    g_counters.last_bytes_inter = r.bytes_inter;
    // Up to the terminator only (strncpy would pad the whole field every call).
    const char* a = r.algorithm != nullptr ? r.algorithm : "";
    const size_t n = strnlen(a, sizeof g_counters.last_algorithm - 1);
    std::memcpy(g_counters.last_algorithm, a, n);
    g_counters.last_algorithm[n] = '\0';
}

void counters_get(gpucoll_counters_t* out) {
    std::lock_guard<std::mutex> lock(g_mutex);
    *out = g_counters;
}

void counters_reset() {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_counters = gpucoll_counters_t{};
}

}  // namespace gpucoll

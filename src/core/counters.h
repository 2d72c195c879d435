// counters.h - per-process counters of which path each collective took.
#pragma once

#include <cstdint>

#include "gpucoll.h"

namespace gpucoll {

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
// The same for a blocking call handed to the host module untouched (every
// host-buffer call: fewer instructions).
void counters_record_delegated(gpucoll_coll_t coll);
void counters_get(gpucoll_counters_t* out);
void counters_reset();

}  // namespace gpucoll

// bootstrap.h - the collective helpers every layer builds on the bootstrap
// seam (gpucoll_bootstrap_t): an allgather of a fixed-size value, and the
// agreement "did every rank succeed?".
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "gpucoll.h"

namespace gpucoll {

// all receives size x bytes: every rank's bytes of mine, in rank order.
inline Status bootstrap_allgather(const gpucoll_bootstrap_t& bs, const void* mine, size_t bytes,
                                  void* all) {
    if (bs.allgather(bs.ctx, mine, all, bytes) != 0)
        return set_error(GPUCOLL_ERR_BOOTSTRAP, "bootstrap allgather failed");
    return kSuccess;
}

template <typename T>
Status bootstrap_allgather(const gpucoll_bootstrap_t& bs, const T& mine, std::vector<T>* all) {
    all->resize(static_cast<size_t>(bs.size));
    return bootstrap_allgather(bs, &mine, sizeof(T), all->data());
}

// Every rank learns whether every rank succeeded (ok).
inline Status bootstrap_agree(const gpucoll_bootstrap_t& bs, bool ok, bool* all_ok) {
    std::vector<uint8_t> all;
    GPUCOLL_TRY(bootstrap_allgather(bs, static_cast<uint8_t>(ok ? 1 : 0), &all));
    *all_ok = true;
    for (uint8_t v : all) *all_ok = *all_ok && v == 1;
    return kSuccess;
}

}  // namespace gpucoll

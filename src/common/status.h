// status.h - errors as status codes, with a per-thread message for the user.
#pragma once

#include "gpucoll.h"

namespace gpucoll {

using Status = gpucoll_status_t;
constexpr Status kSuccess = GPUCOLL_SUCCESS;

// Records a printf-style message as the calling thread's last error and
// returns s, so that `return set_error(GPUCOLL_ERR_SYSTEM, "...")` reads well.
Status set_error(Status s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* last_error();
void clear_error();

}  // namespace gpucoll

// Propagates a failure: GPUCOLL_TRY(expr) returns expr's status if not success.
#define GPUCOLL_TRY(expr)                                                 \
    do {                                                                  \
        ::gpucoll::Status gpucoll_try_s_ = (expr);                        \
        if (gpucoll_try_s_ != ::gpucoll::kSuccess) return gpucoll_try_s_; \
    } while (0)

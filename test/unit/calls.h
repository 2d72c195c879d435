// calls.h - gpucoll_call_t descriptions the unit tests share.
#pragma once

#include <cstddef>

#include "gpucoll.h"

// A float SUM allreduce of device buffers on this rank (send may be NULL:
// in place).
inline gpucoll_call_t sum_allreduce_call(const void* send, void* recv, size_t count) {
    gpucoll_call_t call{};
    call.coll = GPUCOLL_COLL_ALLREDUCE;
    call.sendbuf = send;
    call.recvbuf = recv;
    call.count = count;
    call.dtype = GPUCOLL_FLOAT;
    call.op = GPUCOLL_OP_SUM;
    call.eligible = call.on_device = 1;
    return call;
}

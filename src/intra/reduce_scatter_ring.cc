// Ring reduce_scatter(_block): partial sums travel around the ring in each
// rank's posted temporary buffer (two slots, by step parity), so that after
// n-1 steps rank r holds block r. Neighbour synchronisation only;
// (n-1)/n x S read per rank (equal blocks).
#include <algorithm>

#include "intra/algorithms.h"

namespace gpucoll::intra {

size_t reduce_scatter_ring_temp_bytes(const gpucoll_call_t& call, int size, size_t elem) {
    size_t largest = 0;
    for (int p = 0; p < size; ++p) largest = std::max(largest, rs_count(call, p));
    return 3 * std::max<size_t>(largest * elem, 1);  // two partial slots + the in-place result
}

Status reduce_scatter_ring(CallContext& ctx) {
    // In the ring order (the topology's, else rank order).
    const int n = ctx.size, me = ctx.rank, pos = ctx.comm.ring_position(me);
    const int left = ctx.comm.ring_at(pos - 1), right = ctx.comm.ring_at(pos + 1);
    const size_t elem = ctx.elem;
    const size_t slot = reduce_scatter_ring_temp_bytes(ctx.call, n, elem) / 3;
    const bool in_place = ctx.call.sendbuf == nullptr;
    char *in = nullptr, *temp = nullptr;
    GPUCOLL_TRY(ctx.input(me, &in));
    GPUCOLL_TRY(ctx.temp(me, &temp));
    char* out = static_cast<char*>(ctx.call.recvbuf);
    if (n == 1) return ctx.copy(out, in, rs_count(ctx.call, me) * elem, false);
    char *left_in = nullptr, *left_temp = nullptr;
    GPUCOLL_TRY(ctx.input(left, &left_in));
    GPUCOLL_TRY(ctx.temp(left, &left_temp));

    for (int s = 0; s < n - 1; ++s) {
        const int c = ctx.comm.ring_at(pos - s - 2);  // the last step lands on our own block
        if (s > 0) {  // the left neighbour's partial of block c is ready
            GPUCOLL_TRY(ctx.wait_peer(left, static_cast<uint64_t>(s)));
            ++ctx.rounds;
        }
        if (s >= 2)  // the right neighbour has read what we wrote into this slot at step s-2
            GPUCOLL_TRY(ctx.wait_peer(right, static_cast<uint64_t>(s)));
        const bool last = s == n - 2;
        const char* partial = s == 0 ? left_in + rs_displ(ctx.call, c) * elem
                                     : left_temp + static_cast<size_t>((s - 1) % 2) * slot;
        char* dst =
            !last ? temp + static_cast<size_t>(s % 2) * slot : (in_place ? temp + 2 * slot : out);
        const void* srcs[2] = {in + rs_displ(ctx.call, c) * elem, partial};
        GPUCOLL_TRY(ctx.reduce(dst, srcs, 2, rs_count(ctx.call, c), 1));
        GPUCOLL_TRY(ctx.signal(static_cast<uint64_t>(s + 1)));
    }
    GPUCOLL_TRY(ctx.signal(kStepDone));  // only the right neighbour reads our input and temp
    GPUCOLL_TRY(ctx.wait_peer(right, kStepDone));
    ++ctx.rounds;
    if (in_place) GPUCOLL_TRY(ctx.copy(out, temp + 2 * slot, rs_count(ctx.call, me) * elem, false));
    return kSuccess;
}

}  // namespace gpucoll::intra

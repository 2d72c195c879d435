// Ring allgather: in step s each rank copies from its left neighbour the
// block that neighbour obtained in step s-1 (its own block at step 0).
// (n-1) x block per rank; neighbour synchronisation only.
#include "intra/algorithms.h"

namespace gpucoll::intra {

Status allgather_block(CallContext& ctx, int p, const char** out);  // allgather_direct.cc

Status allgather_ring(CallContext& ctx) {
    // In the ring order (the topology's, else rank order): at step s the
    // block of the rank s+1 positions to our left arrives.
    const int n = ctx.size, me = ctx.rank, pos = ctx.comm.ring_position(me);
    const int left = ctx.comm.ring_at(pos - 1), right = ctx.comm.ring_at(pos + 1);
    const size_t block = ctx.call.count * ctx.elem;
    char* out = static_cast<char*>(ctx.call.recvbuf);
    const char* own = nullptr;
    GPUCOLL_TRY(allgather_block(ctx, me, &own));
    GPUCOLL_TRY(ctx.copy(out + static_cast<size_t>(me) * block, own, block, false));
    if (n == 1) return kSuccess;
    char* left_out = nullptr;
    GPUCOLL_TRY(ctx.output(left, &left_out));
    for (int s = 0; s < n - 1; ++s) {
        const int c = ctx.comm.ring_at(pos - s - 1);
        const char* src = nullptr;
        if (s == 0) {
            GPUCOLL_TRY(allgather_block(ctx, left, &src));
        } else {
            GPUCOLL_TRY(ctx.wait_peer(left, static_cast<uint64_t>(s)));
            ++ctx.rounds;
            src = left_out + static_cast<size_t>(c) * block;
        }
        GPUCOLL_TRY(ctx.copy(out + static_cast<size_t>(c) * block, src, block, true));
        GPUCOLL_TRY(ctx.signal(static_cast<uint64_t>(s + 1)));
    }
    GPUCOLL_TRY(ctx.signal(kStepDone));
    GPUCOLL_TRY(ctx.wait_peer(right, kStepDone));
    ++ctx.rounds;
    return kSuccess;
}

}  // namespace gpucoll::intra

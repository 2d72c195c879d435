// Ring allreduce, zero-copy: n-1 reduce-scatter steps, each adding the left
// neighbour's partial block to ours in our output, then n-1 allgather steps
// copying finished blocks from the left. Only neighbours synchronise, so it
// suits GPUs that are not all directly connected (PCIe). 2(n-1)/n x S per rank.
//
// Step t of rank r waits for step t-1 of its left neighbour; around the ring
// that orders every read before the write that would overwrite it (see
// docs/algorithms.md).
#include "intra/algorithms.h"

namespace gpucoll::intra {

Status allreduce_ring(CallContext& ctx) {
    const size_t count = ctx.call.count, elem = ctx.elem;
    // Positions in the ring order (the topology's, else rank order); blocks
    // are numbered by position, as every rank ends with all of them.
    const int n = ctx.size, me = ctx.rank, pos = ctx.comm.ring_position(me);
    const int left = ctx.comm.ring_at(pos - 1), right = ctx.comm.ring_at(pos + 1);
    char* out = static_cast<char*>(ctx.call.recvbuf);
    char *in = nullptr, *left_in = nullptr, *left_out = nullptr;
    GPUCOLL_TRY(ctx.input(me, &in));
    if (n == 1) return ctx.copy(out, in, count * elem, false);
    GPUCOLL_TRY(ctx.input(left, &left_in));
    GPUCOLL_TRY(ctx.output(left, &left_out));
    auto begin = [&](int c) { return block_begin(count, n, c); };
    auto length = [&](int c) { return begin(c + 1) - begin(c); };

    for (int s = 0; s < n - 1; ++s) {  // reduce-scatter
        const int c = ((pos - s - 1) % n + n) % n;
        if (s > 0) {
            GPUCOLL_TRY(ctx.wait_peer(left, static_cast<uint64_t>(s)));
            ++ctx.rounds;
        }
        const char* partial = (s == 0 ? left_in : left_out) + begin(c) * elem;
        const void* srcs[2] = {in + begin(c) * elem, partial};
        GPUCOLL_TRY(ctx.reduce(out + begin(c) * elem, srcs, 2, length(c), 1));
        GPUCOLL_TRY(ctx.signal(static_cast<uint64_t>(s + 1)));
    }
    for (int s = 0; s < n - 1; ++s) {  // allgather
        const int c = ((pos - s) % n + n) % n;
        GPUCOLL_TRY(ctx.wait_peer(left, static_cast<uint64_t>(n - 1 + s)));
        ++ctx.rounds;
        GPUCOLL_TRY(
            ctx.copy(out + begin(c) * elem, left_out + begin(c) * elem, length(c) * elem, true));
        GPUCOLL_TRY(ctx.signal(static_cast<uint64_t>(n + s)));
    }
    GPUCOLL_TRY(ctx.signal(kStepDone));  // only the right neighbour reads our buffers
    GPUCOLL_TRY(ctx.wait_peer(right, kStepDone));
    ++ctx.rounds;
    return kSuccess;
}

}  // namespace gpucoll::intra

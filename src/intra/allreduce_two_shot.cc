// Two-shot allreduce (large messages), zero-copy on the users' buffers:
// reduce-scatter (each rank reduces its block from every peer's input into its
// own output) then allgather (each rank copies the peers' reduced blocks).
// 2(n-1)/n x S moved per rank - the lower bound.
//
// Pipelined in chunks of chunk_bytes: a rank signals each chunk of its block
// as soon as it is reduced, and peers copy that chunk while it reduces the
// next one, so reduction, copies and signalling of different ranks overlap.
// Rounds: the post, one per chunk waited for, and the end (nobody touches a
// peer's buffer after the call returns).
#include <algorithm>

#include "intra/algorithms.h"

namespace gpucoll::intra {

Status allreduce_two_shot(CallContext& ctx) {
    const size_t count = ctx.call.count, elem = ctx.elem;
    const int n = ctx.size, me = ctx.rank;
    // Elements per chunk; chunk indices are progress steps, which stay below kStepDone.
    const size_t block_max = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
    const size_t chunk = std::max({ctx.comm.config().chunk_bytes / elem, size_t{1},
                                   (block_max + kStepDone - 3) / (kStepDone - 2)});
    char* out = static_cast<char*>(ctx.call.recvbuf);

    char** inputs = ctx.inputs();
    for (int p = 0; p < n; ++p) GPUCOLL_TRY(ctx.input(p, &inputs[p]));
    const void** srcs = ctx.sources();
    const size_t b = block_begin(count, n, me), e = block_begin(count, n, me + 1);
    uint64_t step = 0;
    for (size_t at = b; at < e; at += chunk) {  // reduce-scatter, chunk by chunk
        const size_t len = std::min(chunk, e - at);
        srcs[0] = inputs[me] + at * elem;  // first: the output may alias it
        for (int p = 0, k = 1; p < n; ++p)
            if (p != me) srcs[k++] = inputs[p] + at * elem;
        GPUCOLL_TRY(ctx.reduce(out + at * elem, srcs, n, len, static_cast<size_t>(n - 1)));
        GPUCOLL_TRY(ctx.signal(++step));
    }

    for (int i = 1; i < n; ++i) {  // allgather, starting with the next rank's block
        const int p = (me + i) % n;
        const size_t pb = block_begin(count, n, p), pe = block_begin(count, n, p + 1);
        char* theirs = nullptr;
        GPUCOLL_TRY(ctx.output(p, &theirs));
        uint64_t their_step = 0;
        for (size_t at = pb; at < pe; at += chunk) {
            GPUCOLL_TRY(ctx.wait_peer(p, ++their_step));
            ++ctx.rounds;
            GPUCOLL_TRY(ctx.copy(out + at * elem, theirs + at * elem,
                                 std::min(chunk, pe - at) * elem, true));
        }
    }
    GPUCOLL_TRY(ctx.signal(kStepDone));
    return ctx.wait_all(kStepDone);
}

}  // namespace gpucoll::intra

// Two-shot allreduce (large messages), zero-copy on the users' buffers:
// reduce-scatter (each rank reduces its block from every peer's input into its
// own output) then allgather (each rank copies the peers' reduced blocks).
// 2(n-1)/n x S moved per rank - the lower bound - in three rounds (post,
// middle, end: nobody touches a peer's buffer after the call returns).
#include <vector>

#include "intra/algorithms.h"

namespace gpucoll::intra {

Status allreduce_two_shot(CallContext& ctx) {
    const size_t count = ctx.call.count, elem = ctx.elem;
    const int n = ctx.size, me = ctx.rank;
    const size_t b = block_begin(count, n, me), e = block_begin(count, n, me + 1);

    std::vector<const void*> srcs;
    char* mine = nullptr;
    GPUCOLL_TRY(ctx.input(me, &mine));
    srcs.push_back(mine + b * elem);  // first: the output may alias it (in place)
    for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        char* in = nullptr;
        GPUCOLL_TRY(ctx.input(p, &in));
        srcs.push_back(in + b * elem);
    }
    char* out = static_cast<char*>(ctx.call.recvbuf);
    GPUCOLL_TRY(ctx.reduce(out + b * elem, srcs.data(), n, e - b, static_cast<size_t>(n - 1)));
    ctx.signal(1);
    GPUCOLL_TRY(ctx.wait_all(1));

    for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        const size_t pb = block_begin(count, n, p), pe = block_begin(count, n, p + 1);
        char* theirs = nullptr;
        GPUCOLL_TRY(ctx.output(p, &theirs));
        GPUCOLL_TRY(ctx.copy(out + pb * elem, theirs + pb * elem, (pe - pb) * elem, true));
    }
    ctx.signal(kStepDone);
    return ctx.wait_all(kStepDone);
}

}  // namespace gpucoll::intra

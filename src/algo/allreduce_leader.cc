// Leader-based allreduce, for any number of ranks per node: local rank 0
// reduces the node's inputs, allreduces the result with the other nodes'
// leaders, and its node-mates copy it. Between nodes only the leaders send
// (2(N-1)/N x S each, ring).
#include "algo/hierarchical.h"

namespace gpucoll::algo {

Status allreduce_leader(CallContext& ctx) {
    inter::Hierarchy& h = *ctx.comm.hierarchy();
    const size_t count = ctx.call.count, elem = ctx.elem;
    const int n = ctx.size;
    char* out = static_cast<char*>(ctx.call.recvbuf);
    if (ctx.rank == 0) {
        const void** srcs = ctx.sources();
        for (int p = 0; p < n; ++p) {  // ours first: the output may alias it
            char* in = nullptr;
            GPUCOLL_TRY(ctx.input(p, &in));
            srcs[p] = in;
        }
        GPUCOLL_TRY(ctx.reduce(out, srcs, n, count, static_cast<size_t>(n - 1)));
        GPUCOLL_TRY(ctx.drain());
        GPUCOLL_TRY(inter::group_allreduce(*h.leaders(), ctx.seq, out, count, ctx.call.dtype,
                                           ctx.call.op, inter_algorithm(h, count * elem)));
        GPUCOLL_TRY(ctx.signal(1));
    } else {
        GPUCOLL_TRY(copy_from_leader(ctx, false, 0, out, count * elem));
    }
    return finish_composed(ctx);
}

}  // namespace gpucoll::algo

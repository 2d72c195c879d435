// Hierarchical allreduce on rails (every node has the same number L of
// ranks): each rank reduces its block (1/L) of the node's inputs (IPC, as
// two-shot), allreduces that block with the ranks of its local rank on the
// other nodes (all L rails at once, each on its own NIC where there are
// several), then copies its node-mates' finished blocks. Between nodes each
// rank sends 2(N-1)/N x S/L (ring) - the lower bound.
#include "algo/hierarchical.h"

namespace gpucoll::algo {

Status allreduce_hier(CallContext& ctx) {
    inter::Hierarchy& h = *ctx.comm.hierarchy();
    const size_t count = ctx.call.count, elem = ctx.elem;
    const int n = ctx.size, me = ctx.rank;
    char* out = static_cast<char*>(ctx.call.recvbuf);
    char** inputs = ctx.inputs();
    for (int p = 0; p < n; ++p) GPUCOLL_TRY(ctx.input(p, &inputs[p]));
    const size_t b = intra::block_begin(count, n, me), e = intra::block_begin(count, n, me + 1);
    if (e > b) {  // 1. this node's sum of my block
        const void** srcs = ctx.sources();
        srcs[0] = inputs[me] + b * elem;  // first: the output may alias it
        for (int p = 0, k = 1; p < n; ++p)
            if (p != me) srcs[k++] = inputs[p] + b * elem;
        GPUCOLL_TRY(ctx.reduce(out + b * elem, srcs, n, e - b, static_cast<size_t>(n - 1)));
    }
    GPUCOLL_TRY(ctx.drain());  // 2. the block between nodes
    GPUCOLL_TRY(inter::group_allreduce(*h.rail(), ctx.seq, out + b * elem, e - b, ctx.call.dtype,
                                       ctx.call.op, inter_algorithm(h, (e - b) * elem)));
    GPUCOLL_TRY(ctx.signal(1));
    for (int i = 1; i < n; ++i) {  // 3. the node-mates' blocks
        const int p = (me + i) % n;
        const size_t pb = intra::block_begin(count, n, p), pe = intra::block_begin(count, n, p + 1);
        char* theirs = nullptr;
        GPUCOLL_TRY(ctx.output(p, &theirs));
        GPUCOLL_TRY(ctx.wait_peer(p, 1));
        ++ctx.rounds;
        GPUCOLL_TRY(ctx.copy(out + pb * elem, theirs + pb * elem, (pe - pb) * elem, true));
    }
    return finish_composed(ctx);
}

}  // namespace gpucoll::algo

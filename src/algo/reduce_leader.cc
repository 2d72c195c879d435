// Leader-based reduce and reduce_scatter(_block) between nodes: local rank 0
// reduces its node's inputs into a temporary device buffer (or, as the
// root, into its receive buffer), the leaders allreduce that vector (ring:
// 2(N-1)/N x S each), and every rank that needs a part of the result copies
// it from its leader: the root its whole buffer, reduce_scatter every rank
// its block.
#include "algo/hierarchical.h"

namespace gpucoll::algo {

namespace {

// Leader: the node's reduction of the whole vector into dst, then the
// leaders' allreduce of it.
Status leader_reduce(CallContext& ctx, char* dst, size_t count) {
    inter::Hierarchy& h = *ctx.comm.hierarchy();
    const void** srcs = ctx.sources();
    for (int p = 0; p < ctx.size; ++p) {  // ours first: the output may alias it
        char* in = nullptr;
        GPUCOLL_TRY(ctx.input(p, &in));
        srcs[p] = in;
    }
    GPUCOLL_TRY(ctx.reduce(dst, srcs, ctx.size, count, static_cast<size_t>(ctx.size - 1)));
    GPUCOLL_TRY(ctx.drain());
    GPUCOLL_TRY(inter::group_allreduce(*h.leaders(), ctx.seq, dst, count, ctx.call.dtype,
                                       ctx.call.op, inter_algorithm(h, count * ctx.elem)));
    return ctx.signal(1);
}

}  // namespace

size_t reduce_leader_temp_bytes(const gpucoll_call_t& call, int size, size_t elem) {
    if (call.coll == GPUCOLL_COLL_REDUCE) return call.count * elem;
    return intra::rs_displ(call, size) * elem;
}

Status reduce_leader(CallContext& ctx) {
    const bool am_root = ctx.comm.global_rank(ctx.rank) == ctx.call.root;
    const size_t bytes = ctx.call.count * ctx.elem;
    if (ctx.rank == 0) {
        char* dst = am_root ? static_cast<char*>(ctx.call.recvbuf) : nullptr;
        if (dst == nullptr) GPUCOLL_TRY(ctx.temp(0, &dst));
        GPUCOLL_TRY(leader_reduce(ctx, dst, ctx.call.count));
    } else if (am_root) {
        GPUCOLL_TRY(copy_from_leader(ctx, true, 0, ctx.call.recvbuf, bytes));
    }
    return finish_composed(ctx);
}

Status reduce_scatter_leader(CallContext& ctx) {
    const size_t total = intra::rs_displ(ctx.call, ctx.comm.hierarchy()->topo().size);
    const int me = ctx.comm.global_rank(ctx.rank);
    if (ctx.rank == 0) {
        char* dst = nullptr;
        GPUCOLL_TRY(ctx.temp(0, &dst));
        GPUCOLL_TRY(leader_reduce(ctx, dst, total));
    }
    const size_t at = intra::rs_displ(ctx.call, me) * ctx.elem;  // every rank: its block
    const size_t bytes = intra::rs_count(ctx.call, me) * ctx.elem;
    if (ctx.rank == 0) {
        char* mine = nullptr;
        GPUCOLL_TRY(ctx.temp(0, &mine));
        GPUCOLL_TRY(ctx.copy(ctx.call.recvbuf, mine + at, bytes, false));
    } else {
        GPUCOLL_TRY(copy_from_leader(ctx, true, at, ctx.call.recvbuf, bytes));
    }
    return finish_composed(ctx);
}

}  // namespace gpucoll::algo

// Leader-based reduce and reduce_scatter(_block) between nodes: local rank 0
// reduces its node's inputs into a temporary device buffer (or, as the
// root, into its receive buffer); for reduce the leaders allreduce that
// vector (ring: 2(N-1)/N x S each) and the root copies it from its leader;
// for reduce_scatter the leaders reduce-scatter it in one round (each ends
// with its node's blocks; (N-1)/N x S sent each with equal nodes) and every
// rank copies its block from its leader.
#include "algo/hierarchical.h"

namespace gpucoll::algo {

namespace {

// Leader: the node's reduction of the whole vector into dst.
Status node_sum(CallContext& ctx, char* dst, size_t count) {
    const void** srcs = ctx.sources();
    for (int p = 0; p < ctx.size; ++p) {  // ours first: the output may alias it
        char* in = nullptr;
        GPUCOLL_TRY(ctx.input(p, &in));
        srcs[p] = in;
    }
    return ctx.reduce(dst, srcs, ctx.size, count, static_cast<size_t>(ctx.size - 1));
}

// Leader: the node's sum into dst, then the leaders' allreduce of it.
Status leader_reduce(CallContext& ctx, char* dst, size_t count) {
    inter::Hierarchy& h = *ctx.comm.hierarchy();
    GPUCOLL_TRY(node_sum(ctx, dst, count));
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
    inter::Hierarchy& h = *ctx.comm.hierarchy();
    const inter::Topology& t = h.topo();
    const size_t total = intra::rs_displ(ctx.call, t.size);
    const int me = ctx.comm.global_rank(ctx.rank);
    if (ctx.rank == 0) {
        // The node's sum of the whole vector, then a reduce-scatter among the
        // leaders: each ends with its node's blocks ((N-1)/N x S sent).
        char* dst = nullptr;
        GPUCOLL_TRY(ctx.temp(0, &dst));
        GPUCOLL_TRY(node_sum(ctx, dst, total));
        const auto pieces = node_pieces(t, [&ctx](int r) {
            return std::make_pair(intra::rs_displ(ctx.call, r) * ctx.elem,
                                  intra::rs_count(ctx.call, r) * ctx.elem);
        });
        GPUCOLL_TRY(ctx.drain());
        GPUCOLL_TRY(inter::group_reduce_scatter(*h.leaders(), ctx.seq, dst, pieces, ctx.call.dtype,
                                                ctx.call.op));
        GPUCOLL_TRY(ctx.signal(1));
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

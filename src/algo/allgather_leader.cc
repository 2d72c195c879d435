// Leader-based allgather: local rank 0 gathers its node's blocks (IPC) into
// their places of its receive buffer, exchanges them with the other nodes'
// leaders, and its node-mates copy the whole result. Blocks of consecutive
// ranks travel as one piece.
#include "algo/hierarchical.h"

namespace gpucoll::algo {

Status allgather_leader(CallContext& ctx) {
    inter::Hierarchy& h = *ctx.comm.hierarchy();
    const inter::Topology& t = h.topo();
    const size_t one = ctx.call.count * ctx.elem, total = one * static_cast<size_t>(t.size);
    char* out = static_cast<char*>(ctx.call.recvbuf);
    if (ctx.rank == 0) {
        for (int p = 0; p < ctx.size; ++p) {
            const size_t at = static_cast<size_t>(ctx.comm.global_rank(p)) * one;
            const bool sent =
                p == 0 ? ctx.call.sendbuf != nullptr
                       : ctx.comm.post_of(p, ctx.seq).buf[intra::kSendBuf].buffer_id != 0;
            char* src = nullptr;
            if (sent) {
                GPUCOLL_TRY(ctx.input(p, &src));
            } else {  // in place: its block of its receive buffer
                GPUCOLL_TRY(ctx.output(p, &src));
                src += at;
            }
            GPUCOLL_TRY(ctx.copy(out + at, src, one, p != 0));
        }
        const auto pieces = node_pieces(
            t, [one](int r) { return std::make_pair(static_cast<size_t>(r) * one, one); });
        GPUCOLL_TRY(ctx.drain());
        GPUCOLL_TRY(inter::group_allgather(*h.leaders(), ctx.seq, out, pieces));
        GPUCOLL_TRY(ctx.signal(1));
    } else {
        GPUCOLL_TRY(copy_from_leader(ctx, false, 0, out, total));
    }
    return finish_composed(ctx);
}

}  // namespace gpucoll::algo

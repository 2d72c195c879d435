// Hierarchical bcast: the root's node leader takes the root's buffer (IPC),
// the leaders pass it down a binomial tree between nodes, and every node's
// ranks copy it from their leader.
#include "algo/hierarchical.h"

namespace gpucoll::algo {

Status bcast_hier(CallContext& ctx) {
    inter::Hierarchy& h = *ctx.comm.hierarchy();
    const inter::Topology& t = h.topo();
    const int root = ctx.call.root;
    const int root_node = t.node_of[root], root_local = t.local_of[root];
    const size_t bytes = ctx.call.count * ctx.elem;
    char* buf = static_cast<char*>(ctx.call.recvbuf);
    const bool am_root = t.node == root_node && ctx.rank == root_local;
    if (ctx.rank == 0) {
        if (t.node == root_node && root_local != 0) {
            char* theirs = nullptr;
            GPUCOLL_TRY(ctx.output(root_local, &theirs));
            GPUCOLL_TRY(ctx.copy(buf, theirs, bytes, true));
        }
        GPUCOLL_TRY(ctx.drain());
        GPUCOLL_TRY(inter::group_bcast(*h.leaders(), ctx.seq, buf, bytes, root_node));
        GPUCOLL_TRY(ctx.signal(1));
    } else if (!am_root) {
        GPUCOLL_TRY(copy_from_leader(ctx, false, 0, buf, bytes));
    }
    return finish_composed(ctx);
}

}  // namespace gpucoll::algo

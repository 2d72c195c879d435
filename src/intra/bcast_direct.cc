// Direct bcast: every rank copies the root's buffer; the root waits until all
// have. S per non-root.
#include "intra/algorithms.h"

namespace gpucoll::intra {

Status bcast_direct(CallContext& ctx) {
    const int root = ctx.call.root;
    const size_t bytes = ctx.call.count * ctx.elem;
    if (ctx.rank == root) {
        GPUCOLL_TRY(ctx.signal(kStepDone));
        return ctx.wait_all(kStepDone);
    }
    char* src = nullptr;
    GPUCOLL_TRY(ctx.output(root, &src));
    return ctx.copy(ctx.call.recvbuf, src, bytes, true);
}

}  // namespace gpucoll::intra

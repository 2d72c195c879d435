// Direct bcast: every rank copies the root's buffer; the root waits until all
// have, then releases them. S per non-root. The release costs the non-roots
// one more flag hop, and buys an error on every rank when one of them fails
// (cannot import the root's buffer, a failed copy): without it the others
// would return success before the failure shows.
#include "intra/algorithms.h"

namespace gpucoll::intra {

Status bcast_direct(CallContext& ctx) {
    const int root = ctx.call.root;
    const size_t bytes = ctx.call.count * ctx.elem;
    if (ctx.rank == root) {
        GPUCOLL_TRY(ctx.wait_all(kStepDone));
        return ctx.signal(kStepDone);
    }
    char* src = nullptr;
    GPUCOLL_TRY(ctx.output(root, &src));
    GPUCOLL_TRY(ctx.copy(ctx.call.recvbuf, src, bytes, true));
    GPUCOLL_TRY(ctx.signal(kStepDone));
    GPUCOLL_TRY(ctx.wait_peer(root, kStepDone));
    ++ctx.rounds;
    return kSuccess;
}

}  // namespace gpucoll::intra

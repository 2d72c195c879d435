// Direct reduce: the root reduces every rank's input into its output; the
// others wait until the root no longer reads their buffers. (n-1) x S read
// by the root; two rounds.

#include "intra/algorithms.h"

namespace gpucoll::intra {

Status reduce_direct(CallContext& ctx) {
    const int n = ctx.size, root = ctx.call.root;
    if (ctx.rank != root) {
        GPUCOLL_TRY(ctx.wait_peer(root, kStepDone));
        ++ctx.rounds;
        return kSuccess;
    }
    const void** srcs = ctx.sources();
    char* in = nullptr;
    GPUCOLL_TRY(ctx.input(root, &in));
    srcs[0] = in;  // first: the output aliases it in place
    for (int p = 0, k = 1; p < n; ++p) {
        if (p == root) continue;
        GPUCOLL_TRY(ctx.input(p, &in));
        srcs[k++] = in;
    }
    GPUCOLL_TRY(ctx.reduce(ctx.call.recvbuf, srcs, n, ctx.call.count, static_cast<size_t>(n - 1)));
    GPUCOLL_TRY(ctx.signal(kStepDone));
    ++ctx.rounds;
    return kSuccess;
}

}  // namespace gpucoll::intra

// Direct reduce: the root reduces every rank's input into its output; the
// others wait until the root no longer reads their buffers. (n-1) x S read
// by the root; two rounds.
#include <vector>

#include "intra/algorithms.h"

namespace gpucoll::intra {

Status reduce_direct(CallContext& ctx) {
    const int n = ctx.size, root = ctx.call.root;
    if (ctx.rank != root) {
        GPUCOLL_TRY(ctx.wait_peer(root, kStepDone));
        ++ctx.rounds;
        return kSuccess;
    }
    std::vector<const void*> srcs;
    char* own = nullptr;
    GPUCOLL_TRY(ctx.input(root, &own));
    srcs.push_back(own);  // first: the output aliases it in place
    for (int p = 0; p < n; ++p) {
        if (p == root) continue;
        char* in = nullptr;
        GPUCOLL_TRY(ctx.input(p, &in));
        srcs.push_back(in);
    }
    GPUCOLL_TRY(
        ctx.reduce(ctx.call.recvbuf, srcs.data(), n, ctx.call.count, static_cast<size_t>(n - 1)));
    GPUCOLL_TRY(ctx.signal(kStepDone));
    ++ctx.rounds;
    return kSuccess;
}

}  // namespace gpucoll::intra

// Direct reduce_scatter(_block): each rank reduces its own block from every
// peer's input. Two rounds; (n-1) x block read per rank. In place, the result
// waits in a local buffer until no peer reads our input any more.

#include "intra/algorithms.h"

namespace gpucoll::intra {

Status reduce_scatter_direct(CallContext& ctx) {
    const int n = ctx.size, me = ctx.rank;
    const size_t mine = rs_count(ctx.call, me), displ = rs_displ(ctx.call, me) * ctx.elem;
    const bool in_place = ctx.call.sendbuf == nullptr;
    char* dst = in_place ? static_cast<char*>(ctx.comm.result().data())
                         : static_cast<char*>(ctx.call.recvbuf);

    const void** srcs = ctx.sources();
    for (int i = 0; i < n; ++i) {  // rank order: the same order for every block
        char* in = nullptr;
        GPUCOLL_TRY(ctx.input(i, &in));
        srcs[i] = in + displ;
    }
    GPUCOLL_TRY(ctx.reduce(dst, srcs, n, mine, static_cast<size_t>(n - 1)));
    GPUCOLL_TRY(ctx.signal(kStepDone));
    GPUCOLL_TRY(ctx.wait_all(kStepDone));
    if (in_place) GPUCOLL_TRY(ctx.copy(ctx.call.recvbuf, dst, mine * ctx.elem, false));
    return kSuccess;
}

}  // namespace gpucoll::intra

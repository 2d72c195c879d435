// Direct allgather: every rank copies each peer's block straight from the
// peer's buffer. (n-1) x block per rank; two rounds.
#include "intra/algorithms.h"

namespace gpucoll::intra {

// Where rank p's own block is: its send buffer, or (in place) its slot of
// its receive buffer.
Status allgather_block(CallContext& ctx, int p, const char** out) {
    char* buf = nullptr;
    if (p == ctx.rank ? ctx.call.sendbuf != nullptr
                      : ctx.comm.post_of(p, ctx.seq).buf[kSendBuf].buffer_id != 0) {
        GPUCOLL_TRY(ctx.input(p, &buf));
        *out = buf;
    } else {
        GPUCOLL_TRY(ctx.output(p, &buf));
        *out = buf + static_cast<size_t>(p) * ctx.call.count * ctx.elem;
    }
    return kSuccess;
}

Status allgather_direct(CallContext& ctx) {
    const size_t block = ctx.call.count * ctx.elem;
    char* out = static_cast<char*>(ctx.call.recvbuf);
    // Staggered: rank r reads r+1, r+2, ... so that the ranks do not all read
    // the same peer at once (one GPU's link would serve n-1 readers).
    for (int k = 0; k < ctx.size; ++k) {
        const int p = (ctx.rank + k) % ctx.size;
        const char* src = nullptr;
        GPUCOLL_TRY(allgather_block(ctx, p, &src));
        GPUCOLL_TRY(ctx.copy(out + static_cast<size_t>(p) * block, src, block, p != ctx.rank));
    }
    GPUCOLL_TRY(ctx.signal(kStepDone));
    return ctx.wait_all(kStepDone);
}

}  // namespace gpucoll::intra

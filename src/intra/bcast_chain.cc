// Pipelined chain bcast (large messages): ranks form a chain from the root;
// each copies chunk i from its predecessor as soon as the predecessor has it,
// so the chain's links work at once. S per non-root; each link reads from one
// peer only, which suits PCIe.
#include <algorithm>

#include "intra/algorithms.h"

namespace gpucoll::intra {

Status bcast_chain(CallContext& ctx) {
    const int n = ctx.size, me = ctx.rank, root = ctx.call.root;
    const int pos = (me - root + n) % n;  // place in the chain
    const int pred = (me - 1 + n) % n, succ = (me + 1) % n;
    const size_t bytes = ctx.call.count * ctx.elem;
    // Step numbers must stay below kStepDone.
    const size_t chunk = std::max(
        {ctx.comm.config().chunk_bytes, size_t{4096}, (bytes + kStepDone - 3) / (kStepDone - 2)});
    const size_t chunks = (bytes + chunk - 1) / chunk;
    char* buf = static_cast<char*>(ctx.call.recvbuf);

    if (pos == 0) {
        GPUCOLL_TRY(ctx.signal(chunks));  // the root has every chunk
    } else {
        char* src = nullptr;
        GPUCOLL_TRY(ctx.output(pred, &src));
        for (size_t i = 0; i < chunks; ++i) {
            GPUCOLL_TRY(ctx.wait_peer(pred, i + 1));
            ++ctx.rounds;
            const size_t off = i * chunk, len = std::min(chunk, bytes - off);
            GPUCOLL_TRY(ctx.copy(buf + off, src + off, len, true));
            GPUCOLL_TRY(ctx.signal(i + 1));
        }
    }
    GPUCOLL_TRY(ctx.signal(kStepDone));
    if (pos != n - 1) {  // our successor reads our buffer
        GPUCOLL_TRY(ctx.wait_peer(succ, kStepDone));
        ++ctx.rounds;
    }
    return kSuccess;
}

}  // namespace gpucoll::intra

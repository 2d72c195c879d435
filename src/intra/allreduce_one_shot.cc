// One-shot allreduce (small messages): every rank copied its input into its
// scratch slot before posting; after the posting round each rank reduces all
// slots into its output. One synchronisation round; (n-1) x S read per rank.
#include "intra/algorithms.h"

namespace gpucoll::intra {

Status allreduce_one_shot(CallContext& ctx) {
    const void** srcs = ctx.sources();
    // Rank order on every rank: the same result everywhere, bit for bit.
    for (int p = 0; p < ctx.size; ++p) srcs[p] = ctx.comm.scratch_slot(p, ctx.seq);
    return ctx.reduce(ctx.call.recvbuf, srcs, ctx.size, ctx.call.count,
                      static_cast<size_t>(ctx.size - 1));
}

}  // namespace gpucoll::intra

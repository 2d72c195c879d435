// One-shot allreduce (small messages): every rank copied its input into its
// scratch slot before posting; after the posting round each rank reduces all
// slots into its output. One synchronisation round; (n-1) x S read per rank.
#include <vector>

#include "intra/algorithms.h"

namespace gpucoll::intra {

Status allreduce_one_shot(CallContext& ctx) {
    std::vector<const void*> srcs;
    srcs.reserve(static_cast<size_t>(ctx.size));
    // Rank order on every rank: the same result everywhere, bit for bit.
    for (int p = 0; p < ctx.size; ++p) srcs.push_back(ctx.comm.scratch_slot(p, ctx.seq));
    return ctx.reduce(ctx.call.recvbuf, srcs.data(), ctx.size, ctx.call.count,
                      static_cast<size_t>(ctx.size - 1));
}

}  // namespace gpucoll::intra

// steps.cc - steps the compositions share.
#include "algo/hierarchical.h"

namespace gpucoll::algo {

Status copy_from_leader(CallContext& ctx, bool temp, size_t offset, void* dst, size_t bytes) {
    char* theirs = nullptr;
    GPUCOLL_TRY(temp ? ctx.temp(0, &theirs) : ctx.output(0, &theirs));
    GPUCOLL_TRY(ctx.wait_peer(0, 1));
    ++ctx.rounds;
    return ctx.copy(dst, theirs + offset, bytes, true);
}

std::vector<std::vector<inter::Piece>> node_pieces(
    const inter::Topology& t, const std::function<std::pair<size_t, size_t>(int)>& where) {
    std::vector<std::vector<inter::Piece>> pieces(static_cast<size_t>(t.nodes()));
    for (int node = 0; node < t.nodes(); ++node)
        for (int r : t.members[node]) {
            auto& list = pieces[node];
            const auto [at, bytes] = where(r);
            if (!list.empty() && list.back().offset + list.back().bytes == at)
                list.back().bytes += bytes;
            else
                list.push_back({at, bytes});
        }
    return pieces;
}

Status finish_composed(CallContext& ctx) {
    GPUCOLL_TRY(ctx.signal(intra::kStepDone));
    return ctx.wait_all(intra::kStepDone);
}

}  // namespace gpucoll::algo

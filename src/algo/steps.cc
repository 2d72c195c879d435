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

Status finish_composed(CallContext& ctx) {
    GPUCOLL_TRY(ctx.signal(intra::kStepDone));
    return ctx.wait_all(intra::kStepDone);
}

}  // namespace gpucoll::algo

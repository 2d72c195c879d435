// bcast_plan.h - how a bcast among the members of a group (one rank per
// node) moves its bytes; shared by the algorithm (group_algorithms.cc) and
// the cost model (topo/cost_model.cc), header-only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>

#include "gpucoll.h"

namespace gpucoll::inter {

// The pipeline chunk a group uses for coll_gpucoll_inter_chunk_size (the
// config's inter_chunk_bytes): within [GPUCOLL_INTER_CHUNK_MIN_BYTES,
// GPUCOLL_INTER_CHUNK_MAX_BYTES]. The group's pinned pool holds slots chunks
// per direction, so an unbounded chunk would overflow its size.
constexpr size_t group_chunk_bytes(size_t configured) {
    return std::clamp<size_t>(configured, GPUCOLL_INTER_CHUNK_MIN_BYTES,
                              GPUCOLL_INTER_CHUNK_MAX_BYTES);
}

struct BcastPlan {
    bool chain = false;   // pipelined chain; false: binomial tree
    size_t segment = 0;   // chain: bytes per segment
    size_t segments = 0;  // chain: number of segments
};

// Binomial tree: ceil(log2 N) whole transfers one after the other (a member
// forwards only what it has received whole), the root's link carrying
// ceil(log2 N) x S. Chain: member i receives segment k from member i-1 while
// it sends segment k-1 to member i+1, K + N - 2 rounds of one segment, every
// link carrying S once. The chain where K (ceil(log2 N) - 1) > N - 2, i.e.
// where its rounds take less than the tree's transfers. Segment: the
// group's chunks in flight at once (slots x chunk, saturated at SIZE_MAX),
// so that each round keeps the staging pipeline full. mode
// (coll_gpucoll_inter_bcast): 0 that choice, 1 always the tree, 2 the chain
// wherever there are three members or more.
inline BcastPlan bcast_plan(int n, size_t bytes, size_t chunk_bytes, int slots, int mode = 0) {
    BcastPlan p;
    if (n < 3 || bytes == 0 || mode == 1) return p;
    size_t levels = 0;
    while ((size_t{1} << levels) < static_cast<size_t>(n)) ++levels;
    const size_t chunk = std::max<size_t>(chunk_bytes, 1);
    const size_t many = static_cast<size_t>(slots > 0 ? slots : 1);
    const size_t segment = chunk > std::numeric_limits<size_t>::max() / many
                               ? std::numeric_limits<size_t>::max()
                               : chunk * many;
    const size_t k = bytes / segment + (bytes % segment != 0 ? 1 : 0);
    // k (levels - 1) <= n - 2, without computing the product (k may be ~bytes).
    const size_t spare = static_cast<size_t>(n - 2);
    if (mode != 2 && (levels <= 1 || k <= spare / (levels - 1))) return p;
    p.chain = true;
    p.segment = segment;
    p.segments = k;
    return p;
}

}  // namespace gpucoll::inter

// select_hierarchical.cc - which composition serves a call of a
// communicator that spans nodes (the counterpart of intra/selection.cc).
#include "algo/hierarchical.h"

namespace gpucoll::algo {

gpucoll_algorithm_t select_hierarchical(const gpucoll_call_t& call, const inter::Topology& topo,
                                        size_t elem, const gpucoll_comm_config_t& config,
                                        const char** why) {
    if (call.coll < 0 || call.coll >= GPUCOLL_COLL_REDUCE_LOCAL) {
        *why = "not a collective of the accelerated path";
        return GPUCOLL_ALGO_STAGED;
    }
    if (intra::call_bytes(call, topo.size, elem) == 0) {
        *why = "nothing to move";
        return GPUCOLL_ALGO_STAGED;
    }
    const gpucoll_algorithm_t forced = config.algorithm[call.coll];
    if (forced == GPUCOLL_ALGO_STAGED) {
        *why = "staged forced";
        return GPUCOLL_ALGO_STAGED;
    }
    switch (call.coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            if (forced == GPUCOLL_ALGO_LEADER) {
                *why = "leader forced";
                return GPUCOLL_ALGO_LEADER;
            }
            if (!topo.equal_ppn()) {
                *why = "nodes with different numbers of ranks: through the leaders";
                return GPUCOLL_ALGO_LEADER;
            }
            *why = "rails: intra reduce-scatter, inter allreduce per local rank, intra allgather";
            return GPUCOLL_ALGO_HIER;
        case GPUCOLL_COLL_BCAST:
            *why = "inter among one rank per node, then intra";
            return GPUCOLL_ALGO_HIER;
        case GPUCOLL_COLL_ALLGATHER:
            *why = "intra to the leader, leaders exchange, intra back";
            return GPUCOLL_ALGO_LEADER;
        case GPUCOLL_COLL_REDUCE:
        case GPUCOLL_COLL_REDUCE_SCATTER:
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
            *why = "intra reduce to the leader, leaders allreduce, intra copy";
            return GPUCOLL_ALGO_LEADER;
        default:
            *why = "no composition between nodes";
            return GPUCOLL_ALGO_STAGED;
    }
}

inter::InterAlgorithm inter_algorithm(const inter::Hierarchy& h, size_t bytes) {
    if (h.algorithm() != inter::InterAlgorithm::Auto) return h.algorithm();
    return bytes <= h.direct_max_bytes() ? inter::InterAlgorithm::Direct
                                         : inter::InterAlgorithm::Ring;
}

}  // namespace gpucoll::algo

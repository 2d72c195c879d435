// selection.cc - which algorithm serves which collective, and the one place
// that chooses among them by size.
#include <algorithm>
#include <cstring>

#include "algo/hierarchical.h"
#include "core/selection_table.h"
#include "intra/algorithms.h"
#include "topo/model_table.h"

namespace gpucoll::intra {

namespace {

// collective, algorithm, function, temp bytes, input in scratch, posts buffers, needs result
const Algorithm kAlgorithms[] = {
    {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_ONE_SHOT, allreduce_one_shot, nullptr, true, false,
     false},
    {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_TWO_SHOT, allreduce_two_shot, nullptr, false, true,
     false},
    {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_RING, allreduce_ring, nullptr, false, true, false},
    {GPUCOLL_COLL_REDUCE_SCATTER, GPUCOLL_ALGO_DIRECT, reduce_scatter_direct, nullptr, false, true,
     true},
    {GPUCOLL_COLL_REDUCE_SCATTER, GPUCOLL_ALGO_RING, reduce_scatter_ring,
     reduce_scatter_ring_temp_bytes, false, true, false},
    {GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, GPUCOLL_ALGO_DIRECT, reduce_scatter_direct, nullptr, false,
     true, true},
    {GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, GPUCOLL_ALGO_RING, reduce_scatter_ring,
     reduce_scatter_ring_temp_bytes, false, true, false},
    {GPUCOLL_COLL_REDUCE, GPUCOLL_ALGO_DIRECT, reduce_direct, nullptr, false, true, false},
    {GPUCOLL_COLL_ALLGATHER, GPUCOLL_ALGO_DIRECT, allgather_direct, nullptr, false, true, false},
    {GPUCOLL_COLL_ALLGATHER, GPUCOLL_ALGO_RING, allgather_ring, nullptr, false, true, false},
    {GPUCOLL_COLL_BCAST, GPUCOLL_ALGO_DIRECT, bcast_direct, nullptr, false, true, false},
    {GPUCOLL_COLL_BCAST, GPUCOLL_ALGO_CHAIN, bcast_chain, nullptr, false, true, false},
    // Where NodeComm::one_kernel_usable says the communicator can take it.
    {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_ONE_KERNEL, allreduce_one_kernel, nullptr, false, false,
     false},
    // Communicators that span nodes only (algo/select_hierarchical.cc).
    {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_HIER, algo::allreduce_hier, nullptr, false, true, false},
    {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_LEADER, algo::allreduce_leader, nullptr, false, true,
     false},
    {GPUCOLL_COLL_BCAST, GPUCOLL_ALGO_HIER, algo::bcast_hier, nullptr, false, true, false},
    {GPUCOLL_COLL_ALLGATHER, GPUCOLL_ALGO_LEADER, algo::allgather_leader, nullptr, false, true,
     false},
    {GPUCOLL_COLL_REDUCE, GPUCOLL_ALGO_LEADER, algo::reduce_leader, algo::reduce_leader_temp_bytes,
     false, true, false},
    {GPUCOLL_COLL_REDUCE_SCATTER, GPUCOLL_ALGO_LEADER, algo::reduce_scatter_leader,
     algo::reduce_leader_temp_bytes, false, true, false},
    {GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, GPUCOLL_ALGO_LEADER, algo::reduce_scatter_leader,
     algo::reduce_leader_temp_bytes, false, true, false},
};

bool between_nodes(gpucoll_algorithm_t id) {
    return id == GPUCOLL_ALGO_HIER || id == GPUCOLL_ALGO_LEADER;
}

constexpr const char* kNames[GPUCOLL_ALGO_COUNT] = {"auto",   "staged",    "one_shot", "two_shot",
                                                    "ring",   "direct",    "chain",    "hier",
                                                    "leader", "one_kernel"};

}  // namespace

const Algorithm* find_algorithm(gpucoll_coll_t coll, gpucoll_algorithm_t id) {
    for (const Algorithm& a : kAlgorithms)
        if (a.coll == coll && a.id == id) return &a;
    return nullptr;
}

size_t call_bytes(const gpucoll_call_t& call, int size, size_t elem) {
    switch (call.coll) {
        case GPUCOLL_COLL_ALLGATHER:
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
            return call.count * elem * static_cast<size_t>(size);
        case GPUCOLL_COLL_REDUCE_SCATTER:
            return rs_displ(call, size) * elem;
        default:
            return call.count * elem;
    }
}

BufferBytes buffer_bytes(const gpucoll_call_t& call, int size, int rank, size_t elem) {
    const bool in_place = call.sendbuf == nullptr;
    const size_t n = static_cast<size_t>(size), one = call.count * elem;
    BufferBytes b;
    switch (call.coll) {
        case GPUCOLL_COLL_BCAST:
            b.recv = one;
            b.out = rank == call.root ? 0 : one;
            b.recv_is_input = rank == call.root;
            return b;
        case GPUCOLL_COLL_ALLGATHER:
            b.send = in_place ? 0 : one;
            b.recv = b.out = n * one;
            break;
        case GPUCOLL_COLL_REDUCE_SCATTER:
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK: {
            const size_t total = rs_displ(call, size) * elem;
            b.out = rs_count(call, rank) * elem;
            b.send = in_place ? 0 : total;
            b.recv = in_place ? total : b.out;
            break;
        }
        case GPUCOLL_COLL_REDUCE:
            b.send = in_place ? 0 : one;
            b.recv = b.out = rank == call.root ? one : 0;
            break;
        default:  // allreduce
            b.send = in_place ? 0 : one;
            b.recv = b.out = one;
    }
    b.recv_is_input = in_place && b.recv != 0;
    return b;
}

gpucoll_algorithm_t select_algorithm(const gpucoll_call_t& call, int size, size_t elem,
                                     const gpucoll_comm_config_t& config, size_t scratch_slot_bytes,
                                     bool ring_links, const char** why,
                                     const topo::ModelTable* model,
                                     const SelectionRules* measured) {
    if (call.coll < 0 || call.coll >= GPUCOLL_COLL_REDUCE_LOCAL) {
        *why = "not a collective of the accelerated path";
        return GPUCOLL_ALGO_STAGED;
    }
    const size_t bytes = call_bytes(call, size, elem);
    if (bytes == 0) {
        *why = "nothing to move";
        return GPUCOLL_ALGO_STAGED;
    }
    const gpucoll_algorithm_t forced = config.algorithm[call.coll];
    if (forced == GPUCOLL_ALGO_STAGED) {
        *why = "staged forced";
        return GPUCOLL_ALGO_STAGED;
    }
    if (forced != GPUCOLL_ALGO_AUTO && !between_nodes(forced) &&
        find_algorithm(call.coll, forced) != nullptr) {
        if (forced == GPUCOLL_ALGO_ONE_SHOT && bytes > scratch_slot_bytes) {
            *why = "one_shot forced, but the message exceeds the one-shot scratch: two_shot";
            return GPUCOLL_ALGO_TWO_SHOT;
        }
        *why = "forced";
        return forced;
    }
    if (measured != nullptr) {
        // The parser kept only what serves the collective on one node;
        // one-shot also needs the call to fit its scratch slot.
        const gpucoll_algorithm_t pick = measured->lookup(call.coll, bytes);
        if (pick == GPUCOLL_ALGO_STAGED) {
            *why = "measured table: staging fastest";
            return pick;
        }
        if (pick != GPUCOLL_ALGO_AUTO && find_algorithm(call.coll, pick) != nullptr &&
            !(pick == GPUCOLL_ALGO_ONE_SHOT && bytes > scratch_slot_bytes)) {
            *why = "measured table: fastest";
            return pick;
        }
    }
    if (model != nullptr) {
        const gpucoll_algorithm_t predicted = model->lookup(call.coll, bytes);
        // Only what this table can run (the model's own table could drift).
        if (predicted == GPUCOLL_ALGO_STAGED ||
            (predicted != GPUCOLL_ALGO_AUTO && !between_nodes(predicted) &&
             find_algorithm(call.coll, predicted) != nullptr)) {
            *why = predicted == GPUCOLL_ALGO_STAGED ? "cost model: staging predicted fastest"
                                                    : "cost model: predicted fastest";
            return predicted;
        }
    }
    switch (call.coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            if (bytes <= std::min(config.one_shot_max_bytes, scratch_slot_bytes)) {
                *why = "small: one round";
                return GPUCOLL_ALGO_ONE_SHOT;
            }
            if (ring_links) {
                *why = "large, GPUs not all joined by NVLink: ring";
                return GPUCOLL_ALGO_RING;
            }
            *why = "large: bandwidth-optimal";
            return GPUCOLL_ALGO_TWO_SHOT;
        case GPUCOLL_COLL_BCAST:
            if (bytes >= config.chain_min_bytes) {
                *why = "large: pipelined chain";
                return GPUCOLL_ALGO_CHAIN;
            }
            *why = "all read the root";
            return GPUCOLL_ALGO_DIRECT;
        case GPUCOLL_COLL_ALLGATHER:
        case GPUCOLL_COLL_REDUCE_SCATTER:
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
            if (ring_links && bytes > config.one_shot_max_bytes) {
                *why = "large, GPUs not all joined by NVLink: ring";
                return GPUCOLL_ALGO_RING;
            }
            *why = "all read their peers";
            return GPUCOLL_ALGO_DIRECT;
        default:
            *why = "all read their peers";
            return GPUCOLL_ALGO_DIRECT;
    }
}

}  // namespace gpucoll::intra

extern "C" {

const char* gpucoll_algorithm_name(gpucoll_algorithm_t algo) {
    return algo >= 0 && algo < GPUCOLL_ALGO_COUNT ? gpucoll::intra::kNames[algo] : "unknown";
}

gpucoll_algorithm_t gpucoll_algorithm_from_name(const char* name) {
    for (int a = 0; a < GPUCOLL_ALGO_COUNT; ++a)
        if (name != nullptr && std::strcmp(name, gpucoll::intra::kNames[a]) == 0)
            return static_cast<gpucoll_algorithm_t>(a);
    return GPUCOLL_ALGO_COUNT;
}

int gpucoll_algorithm_valid(gpucoll_coll_t coll, gpucoll_algorithm_t algo) {
    if (algo == GPUCOLL_ALGO_AUTO || algo == GPUCOLL_ALGO_STAGED) return 1;
    return gpucoll::intra::find_algorithm(coll, algo) != nullptr ? 1 : 0;
}

}  // extern "C"

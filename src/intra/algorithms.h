// algorithms.h - the intra-node algorithms and the one table that says which
// algorithm serves which collective.
#pragma once

#include "gpucoll.h"
#include "intra/node_comm.h"

namespace gpucoll::intra {

struct Algorithm {
    gpucoll_coll_t coll;
    gpucoll_algorithm_t id;
    Status (*run)(CallContext& ctx);
    // Bytes of temporary device buffer the algorithm posts for peers (0: none).
    size_t (*temp_bytes)(const gpucoll_call_t& call, int size, size_t elem);
    // Copies the input into the scratch slot before posting (one-shot).
    bool input_in_scratch;
    // Peers read this rank's send/receive buffers (all but one-shot).
    bool posts_buffers;
    // Needs the local result buffer (in-place results kept aside).
    bool needs_result;
};

// The algorithm id serves coll, or nullptr.
const Algorithm* find_algorithm(gpucoll_coll_t coll, gpucoll_algorithm_t id);

// Bytes a collective moves per rank buffer: the selection works on these.
size_t call_bytes(const gpucoll_call_t& call, int size, size_t elem);

// Bytes of this rank's buffers that a call reads (send, recv) and writes (out).
struct BufferBytes {
    size_t send = 0;
    size_t recv = 0;             // the receive buffer's significant size (in place: the input too)
    size_t out = 0;              // what the call writes into it
    bool recv_is_input = false;  // the call reads the receive buffer (in place, bcast root)
};
BufferBytes buffer_bytes(const gpucoll_call_t& call, int size, int rank, size_t elem);

// The selection table: forced algorithm if valid for this call, else by size
// and links (ring_links: the GPUs are not all joined by NVLink, so large calls
// take ring algorithms). The same on every rank (it depends only on arguments
// MPI requires to match, and on the layout every rank agreed on).
// model: the cost model's table (null or empty: none), asked before the
// size thresholds.
}  // namespace gpucoll::intra
namespace gpucoll::topo {
class ModelTable;
}
namespace gpucoll {
class SelectionRules;
}
namespace gpucoll::intra {
// measured: the measured selection table's rules (coll_gpucoll_selection_file;
// null or empty: none), asked after a forced algorithm and before the model.
gpucoll_algorithm_t select_algorithm(const gpucoll_call_t& call, int size, size_t elem,
                                     const gpucoll_comm_config_t& config, size_t scratch_slot_bytes,
                                     bool ring_links, const char** why,
                                     const topo::ModelTable* model = nullptr,
                                     const SelectionRules* measured = nullptr);

// Element range [begin, end) of block p when count elements are split in size blocks.
inline size_t block_begin(size_t count, int size, int p) {
    return count * static_cast<size_t>(p) / static_cast<size_t>(size);
}

// reduce_scatter(_block): elements of rank p's block, and where it starts.
inline size_t rs_count(const gpucoll_call_t& call, int p) {
    return call.counts != nullptr ? call.counts[p] : call.count;
}
inline size_t rs_displ(const gpucoll_call_t& call, int p) {
    size_t d = 0;
    for (int q = 0; q < p; ++q) d += rs_count(call, q);
    return d;
}

Status allreduce_one_shot(CallContext& ctx);
Status allreduce_one_kernel(CallContext& ctx);
Status allreduce_two_shot(CallContext& ctx);
Status allreduce_ring(CallContext& ctx);
Status reduce_scatter_direct(CallContext& ctx);
Status reduce_scatter_ring(CallContext& ctx);
Status reduce_direct(CallContext& ctx);
Status allgather_direct(CallContext& ctx);
Status allgather_ring(CallContext& ctx);
Status bcast_direct(CallContext& ctx);
Status bcast_chain(CallContext& ctx);

size_t reduce_scatter_ring_temp_bytes(const gpucoll_call_t& call, int size, size_t elem);

}  // namespace gpucoll::intra

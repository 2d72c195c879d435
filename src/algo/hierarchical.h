// hierarchical.h - collectives of communicators that span nodes, composed
// of intra-node steps (IPC, as the node algorithms) and inter-node steps
// (the groups of inter/hierarchy.h). Each runs as one call of the node
// communicator: its steps are that call's progress steps.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "inter/hierarchy.h"
#include "intra/algorithms.h"

namespace gpucoll::algo {

using intra::CallContext;

// The selection table between nodes: forced composition if valid, else by
// collective and shape. The same on every rank (arguments and topology).
gpucoll_algorithm_t select_hierarchical(const gpucoll_call_t& call, const inter::Topology& topo,
                                        size_t elem, const gpucoll_comm_config_t& config,
                                        const char** why);

// The inter-node algorithm for a group allreduce of bytes per member.
inter::InterAlgorithm inter_algorithm(const inter::Hierarchy& h, size_t bytes);

// Not local rank 0: once the leader signalled step 1, copies bytes at
// offset of its receive buffer (temp: its temporary buffer) into dst.
Status copy_from_leader(CallContext& ctx, bool temp, size_t offset, void* dst, size_t bytes);
// The end of every composition: done with the peers' memory; wait until
// they are done with ours.
Status finish_composed(CallContext& ctx);
// Per node, the pieces of a buffer that belong to its ranks (rank r's:
// where(r) = {offset, bytes}), consecutive ones merged.
std::vector<std::vector<inter::Piece>> node_pieces(
    const inter::Topology& t, const std::function<std::pair<size_t, size_t>(int)>& where);

Status allreduce_hier(CallContext& ctx);
Status allreduce_leader(CallContext& ctx);
Status bcast_hier(CallContext& ctx);
Status allgather_leader(CallContext& ctx);
Status reduce_leader(CallContext& ctx);
Status reduce_scatter_leader(CallContext& ctx);
size_t reduce_leader_temp_bytes(const gpucoll_call_t& call, int size, size_t elem);

}  // namespace gpucoll::algo

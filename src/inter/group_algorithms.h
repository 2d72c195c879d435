// group_algorithms.h - collectives among the members of a group (one rank
// per node) over the transport, on device buffers.
#pragma once

#include <vector>

#include "inter/group.h"

namespace gpucoll::inter {

enum class InterAlgorithm { Auto = 0, Ring, Direct };
const char* inter_algorithm_name(InterAlgorithm a);

// buf (count elements) = the reduction of every member's buf. Ring:
// reduce-scatter then allgather, 2(N-1)/N x S sent per member. Direct: every
// member sends its buffer to every other and reduces all N in member order,
// one round (small messages). The result is the same on every member, bit
// for bit.
// The ring's 2(N-1) steps must stay below the reserved tag steps
// (transport.h): from 2048 members on, direct instead.
bool ring_fits(int members);

Status group_allreduce(Group& g, uint64_t seq, void* buf, size_t count, gpucoll_dtype_t dtype,
                       gpucoll_op_t op, InterAlgorithm algo);
// buf of member root to every member: binomial tree, log2(N) rounds, or a
// pipelined chain in segments where that is faster (bcast_plan.h).
Status group_bcast(Group& g, uint64_t seq, void* buf, size_t bytes, int root);

// A contiguous piece of a buffer that one member contributes.
struct Piece {
    size_t offset, bytes;
};
// Every member's pieces (pieces[m]) of buf, from that member to every other.
Status group_allgather(Group& g, uint64_t seq, void* buf,
                       const std::vector<std::vector<Piece>>& pieces);
// Reduce-scatter in one round: member m ends with the reduction of every
// member's buf in its own pieces (pieces[m]). Each member sends every other
// that member's pieces ((N-1)/N x S with equal pieces: the lower bound) and
// reduces what it received in member order (the same bits run after run).
Status group_reduce_scatter(Group& g, uint64_t seq, void* buf,
                            const std::vector<std::vector<Piece>>& pieces, gpucoll_dtype_t dtype,
                            gpucoll_op_t op);

}  // namespace gpucoll::inter

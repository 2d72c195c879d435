// cost_model.cc - the formulas of docs/cost-model.md, one function per
// algorithm, each following its file in src/intra, src/algo and src/inter.
#include "topo/cost_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "common/text_file.h"
#include "inter/bcast_plan.h"

namespace gpucoll::topo {

namespace {

// Chunks a group keeps in flight per direction (inter::GroupConfig::slots).
constexpr int kGroupSlots = 4;

// Microseconds to move bytes at GBps (1 GB/s = 1e3 bytes per microsecond).
double us(double bytes, double GBps) { return bytes <= 0 ? 0 : bytes / (GBps * 1e3); }

double chunks(double bytes, double chunk) { return bytes <= 0 ? 0 : std::ceil(bytes / chunk); }

// A count of waits as an int, however many chunks a huge call has.
int saturated(double count) {
    return count >= std::numeric_limits<int>::max() ? std::numeric_limits<int>::max()
                                                    : static_cast<int>(count);
}

double log2_ceil(double n) { return n <= 1 ? 0 : std::ceil(std::log2(n)); }

// A measured host table's time at bytes (ModelParams::host_table: points
// with sizes increasing, times positive): log-log between the two points
// around it; below the first, the first; beyond the last, in proportion.
double table_us(const ModelParams::HostTable& t, double bytes) {
    if (bytes <= t.front().first) return t.front().second;
    if (bytes >= t.back().first) return t.back().second * (bytes / t.back().first);
    const auto hi = std::lower_bound(t.begin(), t.end(), bytes,
                                     [](const auto& point, double b) { return point.first < b; });
    const auto lo = hi - 1;
    const double f = std::log(bytes / lo->first) / std::log(hi->first / lo->first);
    return lo->second * std::pow(hi->second / lo->second, f);
}

bool reduces(gpucoll_coll_t coll) {
    return coll == GPUCOLL_COLL_ALLREDUCE || coll == GPUCOLL_COLL_REDUCE ||
           coll == GPUCOLL_COLL_REDUCE_SCATTER || coll == GPUCOLL_COLL_REDUCE_SCATTER_BLOCK;
}

bool modelled(gpucoll_coll_t coll) {
    return reduces(coll) || coll == GPUCOLL_COLL_BCAST || coll == GPUCOLL_COLL_ALLGATHER;
}

// Time, critical-path waits and busiest rank's received bytes of one
// algorithm or of one part of it.
struct Estimate {
    double us = 0;
    int syncs = 0;
    double recv = 0;
};

// What the ranks of one node touch in one call of algo, in bytes: each
// rank's input and output as the call reads and writes them, plus one_shot's
// scratch slot, reduce_scatter ring's temporary block and staged's pinned
// copies. The cache term's working set W.
double working_set(gpucoll_coll_t coll, gpucoll_algorithm_t algo, double S, int L, int N) {
    const double P = static_cast<double>(L) * N;
    double in = S, out = S;  // per rank
    if (coll == GPUCOLL_COLL_ALLGATHER) in = S / P;
    if (coll == GPUCOLL_COLL_REDUCE_SCATTER || coll == GPUCOLL_COLL_REDUCE_SCATTER_BLOCK)
        out = S / P;
    if (coll == GPUCOLL_COLL_BCAST) out = 0;       // one buffer
    if (coll == GPUCOLL_COLL_REDUCE) out = S / L;  // the root's, one rank of the node
    double extra = 0;
    if (algo == GPUCOLL_ALGO_ONE_SHOT) extra = S;
    if (algo == GPUCOLL_ALGO_RING && out < S) extra = S / P;
    if (algo == GPUCOLL_ALGO_STAGED) extra = in + out;
    return L * (in + out + extra);
}

// The share of a working set of ws bytes that a cache of cache bytes holds
// (0: no cache term).
double cached_share(double cache, double ws) {
    return cache <= 0 ? 0 : ws <= cache ? 1 : cache / ws;
}

// The formulas for one call: S bytes on L ranks per node and N nodes.
class Model {
public:
    Model(const ModelParams& p, gpucoll_coll_t coll, gpucoll_algorithm_t algo, double bytes,
          Shape shape)
        : p_(p),
          coll_(coll),
          S_(bytes),
          L_(shape.ranks_per_node),
          N_(shape.nodes),
          ws_(working_set(coll, algo, bytes, shape.ranks_per_node, shape.nodes)),
          cached_(cached_share(p.cache_bytes, ws_)),
          cached_peer_(p.peer_cache_bytes > 0
                           ? std::min(cached_, cached_share(p.peer_cache_bytes, ws_))
                           : cached_) {}

    Estimate one_shot() const;
    Estimate two_shot() const;
    Estimate allreduce_ring() const;
    Estimate reduce_scatter_direct() const;
    Estimate reduce_scatter_ring() const;
    Estimate reduce_direct() const;
    Estimate allgather_direct() const;
    Estimate allgather_ring() const;
    Estimate bcast_direct() const;
    Estimate bcast_chain() const;
    Estimate allreduce_hier() const;
    Estimate allreduce_leader() const;
    Estimate bcast_hier() const;
    Estimate allgather_leader() const;
    Estimate reduce_leader() const;
    Estimate reduce_scatter_leader() const;
    Estimate staged() const;
    Estimate single_rank() const;

private:
    // --- inside a node of n ranks
    int mates(int n) const { return std::min(std::max(p_.gpus_per_switch, 1), n); }
    // Each rank reads x bytes spread over all its peers, all ranks at once.
    double spread(int n, double x) const { return us(x, all_peers_GBps(p_, n)); }
    // Each rank reads x bytes from its left neighbour, all ranks at once:
    // ring order crosses each switch boundary once, one flow per uplink.
    double neighbour(int n, double x) const {
        const double bw = n > mates(n) ? std::min(p_.peer.bandwidth_GBps, p_.switch_uplink_GBps)
                                       : p_.peer.bandwidth_GBps;
        return us(x, bw);
    }
    // n-1 ranks read x bytes each from one rank (or one rank from n-1): that
    // rank's link, and its switch's uplink for those under other switches.
    double fan(int n, double x) const {
        return std::max(us((n - 1) * x, p_.peer.bandwidth_GBps),
                        us((n - mates(n)) * x, p_.switch_uplink_GBps));
    }
    // k operations issued back to back on a rank's stream: the first one's
    // fixed cost, then the larger of issuing the rest and moving the data
    // (issue overlaps execution). data_us: the slowest resource.
    static double stream(double k, double fixed_us, double data_us) {
        return k <= 0 ? 0 : fixed_us + std::max((k - 1) * fixed_us, data_us);
    }
    // How many times longer CPU work takes when active ranks of the node
    // work at once on its shared cores.
    double share(double active) const {
        return p_.shared_cores > 0 ? std::max(1.0, active / p_.shared_cores) : 1.0;
    }
    bool oversubscribed() const { return p_.shared_cores > 0 && L_ > p_.shared_cores; }
    // This node's index in the values measured per rank count from first
    // (the *_at arrays: 3, host_table: 2) to 8, -1 when its rank count has none.
    int per_count_index(int first = ModelParams::kHostRanksFirst) const {
        return L_ >= first && L_ <= ModelParams::kHostRanksLast ? L_ - first : -1;
    }
    // The rate of an operation in this call: the cached share of its traffic
    // at the cached rate (harmonic mean), divided among the active ranks
    // sharing the node's cores.
    double rate(const LinkCost& l, double active, double cached) const {
        double bw = l.bandwidth_GBps;
        if (cached > 0 && l.cached_GBps > 0) bw = 1 / (cached / l.cached_GBps + (1 - cached) / bw);
        return bw / share(active);
    }
    double rate(const LinkCost& l, double active) const { return rate(l, active, cached_); }
    double rate(const LinkCost& l) const { return rate(l, L_); }
    // A fixed cost of CPU work, stretched when ranks share the node's cores.
    double cpu(double fixed_us, double active) const { return fixed_us * share(active); }
    double cpu(double fixed_us) const { return cpu(fixed_us, L_); }
    // What the operations of one stream do together: peer bytes read from
    // peers (over link_us of peer links), local bytes of device memory
    // traffic, shared bytes written into memory a peer has read; active:
    // ranks of the node working at once (0: all).
    struct Work {
        double link_us = 0, local = 0, peer = 0, shared = 0, active = 0;
    };
    double operations(double k, const LinkCost& op, const Work& w) const {
        const double active = w.active > 0 ? w.active : L_;
        const double fixed = cpu(op.latency_us + (w.peer > 0 ? p_.peer.latency_us : 0), active);
        double data = p_.peer_local_memory ? us(w.local, rate(op, active)) +
                                                 us(w.peer, rate(op, active, cached_peer_))
                                           : std::max(w.link_us, us(w.local, rate(op, active)));
        if (p_.shared_write_GBps > 0)
            data += cached_ * us(w.shared, p_.shared_write_GBps) * share(active);
        return stream(k, fixed, data);
    }
    // k copies (reductions) on a rank's stream.
    double copies(double k, double link_us, double local_bytes, double peer_bytes,
                  double shared_bytes = 0, double active = 0) const {
        return operations(k, p_.device_copy,
                          {link_us, local_bytes, peer_bytes, shared_bytes, active});
    }
    double reductions(double k, double link_us, double local_bytes, double peer_bytes,
                      double shared_bytes = 0, double active = 0) const {
        return operations(k, p_.device_reduce,
                          {link_us, local_bytes, peer_bytes, shared_bytes, active});
    }
    double overhead() const { return cpu(p_.call_overhead_us); }
    // One handshake between ranks of the node.
    double handshake() const {
        if (!oversubscribed()) return p_.sync_us;
        if (const int i = per_count_index(); i >= 0 && p_.oversubscribed_sync_at[i] > 0)
            return p_.oversubscribed_sync_at[i];
        return p_.oversubscribed_sync_us > 0 ? p_.oversubscribed_sync_us : p_.sync_us;
    }
    double sync(int k) const { return k * handshake(); }
    // A wait for node-mates: none when the node has one rank.
    double mate_sync() const { return L_ > 1 ? handshake() : 0; }

    // --- between nodes
    // Ranks of a node that drive one NIC at once when every local rank
    // talks to its rail.
    double rail_share() const {
        return std::max(1.0, std::ceil(static_cast<double>(L_) / std::max(p_.nics_per_node, 1)));
    }
    double transfer(double send, double recv, bool reduce, double share) const;
    Estimate group_allreduce(double bytes, double share) const;
    // The verdict exchanged between nodes on every call: one small round.
    double verdict() const { return p_.nic.latency_us; }
    // The chunk a group uses (inter/group.cc), whatever the parameter says.
    size_t inter_chunk() const {
        const double c = p_.inter_chunk_bytes, most = GPUCOLL_INTER_CHUNK_MAX_BYTES;
        return inter::group_chunk_bytes(!(c >= 1)   ? 1
                                        : c >= most ? GPUCOLL_INTER_CHUNK_MAX_BYTES
                                                    : static_cast<size_t>(c));
    }

    const ModelParams& p_;
    gpucoll_coll_t coll_;
    double S_;
    int L_, N_;
    double ws_;           // working set of the node (bytes)
    double cached_;       // share of the traffic in cache
    double cached_peer_;  // share of the bytes read from peers in cache
};

// --------------------------------------------------------------- one node

// allreduce_one_shot.cc: the input is copied into the scratch slot before
// posting; after the agreement every rank reduces all n slots at once.
Estimate Model::one_shot() const {
    const int n = L_;
    Estimate e;
    e.us = overhead() + copies(1, 0, 2 * S_, 0, S_) + sync(1) +
           reductions(1, spread(n, (n - 1) * S_), 2 * S_, (n - 1) * S_);
    e.syncs = 1;
    e.recv = (n - 1) * S_;
    return e;
}

// allreduce_two_shot.cc: each rank reduces its block b from all inputs, chunk
// by chunk, then copies the n-1 other blocks chunk by chunk. Every rank runs
// its reduce-scatter before its allgather on one stream, so with ranks in
// step the chunking overlaps nothing: it adds operations.
Estimate Model::two_shot() const {
    const int n = L_;
    const double b = S_ / n, k = chunks(b, p_.chunk_bytes);
    Estimate e;
    e.us = overhead() + sync(1) + reductions(k, spread(n, (n - 1) * b), 2 * b, (n - 1) * b, b) +
           sync(1) + copies((n - 1) * k, spread(n, (n - 1) * b), (n - 1) * b, (n - 1) * b) +
           sync(1);
    e.syncs = 3;
    e.recv = 2 * (n - 1) * b;
    return e;
}

// allreduce_ring.cc: n-1 steps adding the left neighbour's partial block,
// n-1 steps copying finished blocks from the left; each step but the first
// waits for the left neighbour's previous one; at the end the right
// neighbour's "done".
Estimate Model::allreduce_ring() const {
    const int n = L_;
    const double b = S_ / n;
    Estimate e;
    e.us = overhead() + sync(1) + (n - 1) * reductions(1, neighbour(n, b), 2 * b, b, b) +
           sync(n - 2) +
           (n - 1) * (sync(1) + copies(1, neighbour(n, b), b, b, b * (n - 2) / (n - 1))) + sync(1);
    e.syncs = 2 * n - 1;
    e.recv = 2 * (n - 1) * b;
    return e;
}

// reduce_scatter_direct.cc: each rank reduces its block from all n inputs in
// one kernel, then waits until no peer reads its input.
Estimate Model::reduce_scatter_direct() const {
    const int n = L_;
    const double b = S_ / n;
    Estimate e;
    e.us =
        overhead() + sync(1) + reductions(1, spread(n, (n - 1) * b), 2 * b, (n - 1) * b) + sync(1);
    e.syncs = 2;
    e.recv = (n - 1) * b;
    return e;
}

// reduce_scatter_ring.cc: n-1 steps, each adding the left neighbour's
// partial (its input at step 0, its temp buffer after) to ours.
Estimate Model::reduce_scatter_ring() const {
    const int n = L_;
    const double b = S_ / n;
    Estimate e;
    e.us = overhead() + sync(1) +
           (n - 1) * reductions(1, neighbour(n, b), 2 * b, b, b * (n - 2) / (n - 1)) + sync(n - 2) +
           sync(1);
    e.syncs = n;
    e.recv = (n - 1) * b;
    return e;
}

// reduce_direct.cc: the root reduces all n inputs at once (its link carries
// n-1 of them); the others wait for its "done".
Estimate Model::reduce_direct() const {
    const int n = L_;
    Estimate e;
    e.us = overhead() + sync(1) + reductions(1, fan(n, S_), 2 * S_, (n - 1) * S_, 0, 1) + sync(1);
    e.syncs = 2;
    e.recv = (n - 1) * S_;
    return e;
}

// allgather_direct.cc: every rank copies the blocks in rank order 0..n-1,
// so all ranks read the same peer at the same time: n-1 fan-outs, one after
// the other, instead of one spread read.
Estimate Model::allgather_direct() const {
    const int n = L_;
    const double b = S_ / n;
    Estimate e;
    e.us = overhead() + sync(1) + copies(1, 0, 2 * b, 0) +
           copies(n - 1, (n - 1) * fan(n, b), (n - 1) * b, (n - 1) * b) + sync(1);
    e.syncs = 2;
    e.recv = (n - 1) * b;
    return e;
}

// allgather_ring.cc: the own block copied locally, then n-1 steps copying
// from the left neighbour what it got the step before.
Estimate Model::allgather_ring() const {
    const int n = L_;
    const double b = S_ / n;
    Estimate e;
    e.us = overhead() + sync(1) + copies(1, 0, 2 * b, 0) +
           (n - 1) * copies(1, neighbour(n, b), b, b, b * (n - 2) / (n - 1)) + sync(n - 2) +
           sync(1);
    e.syncs = n;
    e.recv = (n - 1) * b;
    return e;
}

// bcast_direct.cc: every non-root copies the root's buffer at once (the
// root's link carries n-1 copies); the root waits for all readers, then
// releases them.
Estimate Model::bcast_direct() const {
    const int n = L_;
    Estimate e;
    e.us = overhead() + sync(1) + copies(1, fan(n, S_), S_, S_, 0, n - 1) + sync(1) + sync(1);
    e.syncs = 3;
    e.recv = S_;
    return e;
}

// bcast_chain.cc: chunk i travels down the chain of n-1 links; each stage
// is a wait for the predecessor's signal and one copy. A pipeline of k
// chunks through n-1 stages ends after the sum of the chunks' stage times
// plus n-2 times the longest one.
Estimate Model::bcast_chain() const {
    const int n = L_;
    const double c = std::max(p_.chunk_bytes, 4096.0), k = chunks(S_, c);
    // Stages in flight at once: the chunks, at most one per link.
    const double active = std::max(1.0, std::min(k, n - 1.0));
    auto stage = [&](double x) {
        return sync(1) + copies(1, neighbour(n, x), x, x, n > 2 ? x : 0, active);
    };
    const double last = S_ - (k - 1) * c;
    const double pipeline =
        k <= 0 ? 0 : (k - 1) * stage(c) + stage(last) + (n - 2) * stage(k > 1 ? c : last);
    Estimate e;
    e.us = overhead() + sync(1) + pipeline + sync(1);
    e.syncs = saturated(k + n);  // agreement, k + n - 2 stages, the end
    e.recv = S_;
    return e;
}

// ------------------------------------------------------------ between nodes

// One Group::transfer (inter/group.cc): this member sends send bytes and
// receives recv bytes, chunk by chunk with several chunks in flight. Via
// host, the calling thread stages every chunk (device to pinned host before
// sending, pinned host to device - or a reduction reading pinned memory -
// after receiving) while the network carries others; direct, received
// chunks that reduce land in a device scratch and are reduced from there.
// share: ranks driving the same NIC at once.
double Model::transfer(double send, double recv, bool reduce, double share) const {
    const double net = us(std::max(send, recv), p_.nic.bandwidth_GBps / share);
    const double c = static_cast<double>(inter_chunk());
    double work = 0, fill = 0;
    if (p_.inter_via_host) {
        work = chunks(send, c) * cpu(p_.d2h.latency_us) + us(send, rate(p_.d2h)) +
               chunks(recv, c) * cpu(p_.h2d.latency_us) + us(recv, rate(p_.h2d));
        fill = us(std::min(c, send), rate(p_.d2h)) + us(std::min(c, recv), rate(p_.h2d));
    } else if (reduce) {
        work = chunks(recv, c) * cpu(p_.device_reduce.latency_us) +
               us(3 * recv, rate(p_.device_reduce));
        fill = us(3 * std::min(c, recv), rate(p_.device_reduce));
    }
    return p_.nic.latency_us + std::max(net, work) + fill;
}

// group_allreduce (inter/group_algorithms.cc) of bytes per member among the
// N nodes: direct (one exchange, then every member reduces all N) up to
// inter_direct_max_bytes, else ring (2(N-1) transfers of bytes/N).
Estimate Model::group_allreduce(double bytes, double share) const {
    const int N = N_;
    Estimate e;
    if (N < 2 || bytes <= 0) return e;
    if (bytes <= p_.inter_direct_max_bytes) {
        e.us = transfer((N - 1) * bytes, (N - 1) * bytes, false, share) +
               copies(1, 0, 2 * bytes, 0) + reductions(1, 0, (N + 1) * bytes, 0);
        e.recv = (N - 1) * bytes;
        return e;
    }
    const double x = bytes / N;
    e.us = (N - 1) * (transfer(x, x, true, share) + transfer(x, x, false, share));
    e.recv = 2 * (N - 1) * x;
    return e;
}

// allreduce_hier.cc: two-shot's reduce-scatter of the node's inputs (one
// kernel per rank), the block allreduced on the rank's rail (all rails at
// once), then the node-mates' blocks copied.
Estimate Model::allreduce_hier() const {
    const int L = L_;
    const double b = S_ / L;
    const Estimate inter = group_allreduce(b, rail_share());
    Estimate e;
    e.us = overhead() + mate_sync() + verdict() +
           reductions(1, spread(L, (L - 1) * b), 2 * b, (L - 1) * b) + inter.us + mate_sync() +
           copies(L - 1, spread(L, (L - 1) * b), (L - 1) * b, (L - 1) * b) + mate_sync();
    e.syncs = L > 1 ? 3 : 0;
    e.recv = 2 * (L - 1) * b + inter.recv;
    return e;
}

// allreduce_leader.cc: local rank 0 reduces the node's inputs (its link
// carries L-1 of them), allreduces with the other leaders, and its
// node-mates copy the result (its link carries L-1 copies).
Estimate Model::allreduce_leader() const {
    const int L = L_;
    const Estimate inter = group_allreduce(S_, 1);
    Estimate e;
    e.us = overhead() + mate_sync() + verdict() + reductions(1, fan(L, S_), 2 * S_, (L - 1) * S_) +
           inter.us + mate_sync() + (L > 1 ? copies(1, fan(L, S_), S_, S_) : 0) + mate_sync();
    e.syncs = L > 1 ? 3 : 0;
    e.recv = std::max((L - 1) * S_ + inter.recv, L > 1 ? S_ : 0);
    return e;
}

// bcast_hier.cc (root: rank 0, a leader): among the leaders group_bcast's
// binomial tree (a member forwards only what it has received whole, so each
// of the ceil(log2 N) levels is one transfer) or, for large buffers, its
// pipelined chain (K + N - 2 rounds of one segment; inter/bcast_plan.h);
// then node-mates copy.
Estimate Model::bcast_hier() const {
    const int L = L_;
    const inter::BcastPlan plan =
        inter::bcast_plan(N_, static_cast<size_t>(S_), inter_chunk(), kGroupSlots, p_.inter_bcast);
    const double seg = static_cast<double>(plan.segment);
    const double between =
        plan.chain ? (static_cast<double>(plan.segments) + N_ - 2) * transfer(seg, seg, false, 1)
                   : log2_ceil(N_) * transfer(S_, S_, false, 1);
    Estimate e;
    e.us = overhead() + mate_sync() + verdict() + between + mate_sync() +
           (L > 1 ? copies(1, fan(L, S_), S_, S_) : 0) + mate_sync();
    e.syncs = L > 1 ? 3 : 0;
    e.recv = S_;
    return e;
}

// allgather_leader.cc: the leader copies its own and its node-mates' blocks
// (one at a time), exchanges the node's part with every other leader in one
// transfer, and its node-mates copy the whole result.
Estimate Model::allgather_leader() const {
    const int L = L_, N = N_;
    const double blk = S_ / (static_cast<double>(N) * L), part = S_ / N;
    Estimate e;
    e.us = overhead() + mate_sync() + verdict() + copies(1, 0, 2 * blk, 0) +
           copies(L - 1, fan(L, blk), (L - 1) * blk, (L - 1) * blk) +
           transfer((N - 1) * part, (N - 1) * part, false, 1) + mate_sync() +
           (L > 1 ? copies(1, fan(L, S_), S_, S_) : 0) + mate_sync();
    e.syncs = L > 1 ? 3 : 0;
    e.recv = std::max((L - 1) * blk + (N - 1) * part, L > 1 ? S_ : 0);
    return e;
}

// reduce_leader.cc (root: rank 0, a leader): leader reduces the node's
// inputs, the leaders allreduce; the root has the result in place.
Estimate Model::reduce_leader() const {
    const int L = L_;
    const Estimate inter = group_allreduce(S_, 1);
    Estimate e;
    e.us = overhead() + mate_sync() + verdict() + reductions(1, fan(L, S_), 2 * S_, (L - 1) * S_) +
           inter.us + mate_sync();
    e.syncs = L > 1 ? 2 : 0;
    e.recv = (L - 1) * S_ + inter.recv;
    return e;
}

// reduce_leader.cc, reduce_scatter_leader: leader reduces the whole vector of
// its node, one-round reduce-scatter among leaders (each sends every other
// node its part; copies its own part and reduces the N regions), then every
// rank copies its block from its leader.
Estimate Model::reduce_scatter_leader() const {
    const int L = L_, N = N_;
    const double part = S_ / N, blk = part / L;
    Estimate e;
    e.us = overhead() + mate_sync() + verdict() + reductions(1, fan(L, S_), 2 * S_, (L - 1) * S_) +
           transfer((N - 1) * part, (N - 1) * part, false, 1) + copies(1, 0, 2 * part, 0) +
           reductions(1, 0, (N + 1) * part, 0) + mate_sync() +
           (L > 1 ? copies(1, fan(L, blk), blk, blk) : 0) + mate_sync();
    e.syncs = L > 1 ? 3 : 0;
    e.recv = (L - 1) * S_ + (N - 1) * part;
    return e;
}

// --------------------------------------------------------------- staged

// coll/coll_gpucoll_staged.c: copy what the call reads to pinned host
// memory, run Open MPI's host algorithm, copy what it writes back. The host
// algorithm is assumed to move the lower bound (bandwidth-optimal for large
// messages) in ceil(log2 p) steps (twice that for allreduce); on one node,
// the measured points of this rank count (host_table) give its time where
// they exist; else, when the collective's own host algorithm was measured
// (host_algorithm, or host_algorithm_at for this many ranks per node), its
// rate replaces the generic copy and reduction terms. Between nodes a staged
// call is agreed too (NodeComm::decline_between_nodes): one verdict.
Estimate Model::staged() const {
    const double P = static_cast<double>(L_) * N_;  // ranks: 65536 x 65536 overflows an int
    double in = S_, out = S_;
    if (coll_ == GPUCOLL_COLL_ALLGATHER) in = S_ / P;
    if (coll_ == GPUCOLL_COLL_REDUCE_SCATTER || coll_ == GPUCOLL_COLL_REDUCE_SCATTER_BLOCK)
        out = S_ / P;
    const double lb = lower_bound_bytes(coll_, static_cast<size_t>(S_), static_cast<int64_t>(P));
    const double steps = log2_ceil(P) * (coll_ == GPUCOLL_COLL_ALLREDUCE ? 2 : 1);
    const LinkCost* measured = &p_.host_algorithm[static_cast<size_t>(coll_)];
    if (const int i = per_count_index(); i >= 0) {
        const LinkCost& at =
            p_.host_algorithm_at[static_cast<size_t>(i)][static_cast<size_t>(coll_)];
        if (at.bandwidth_GBps > 0) measured = &at;
    }
    const ModelParams::HostTable* table = nullptr;
    if (const int i = per_count_index(ModelParams::kTableRanksFirst); i >= 0)
        table = &p_.host_table[static_cast<size_t>(i)][static_cast<size_t>(coll_)];
    double host = 0;
    if (N_ == 1 && table != nullptr && !table->empty()) {  // measured at this size
        host = table_us(*table, S_);
    } else if (N_ == 1 && measured->bandwidth_GBps > 0) {
        // this collective's host algorithm, measured
        host = steps * cpu(measured->latency_us) + us(lb, rate(*measured));
    } else {
        double step_us = cpu(p_.host_copy.latency_us), bw = rate(p_.host_copy);
        if (N_ > 1) {
            step_us = std::max(step_us, p_.nic.latency_us);
            bw = std::min(bw, p_.nic.bandwidth_GBps / rail_share());
        }
        const double reduced = reduces(coll_) ? 3.0 * (P - 1) / P * S_ : 0;
        host = steps * step_us + us(lb, bw) + (reduced > 0 ? cpu(p_.host_reduce.latency_us) : 0) +
               us(reduced, rate(p_.host_reduce));
    }
    Estimate e;
    // The node's ranks that copy at the same time: bcast's root copies in
    // while the others wait in the host algorithm, and they copy out while
    // it has nothing to copy back; reduce's root alone copies out.
    double in_active = L_, out_active = L_;
    if (coll_ == GPUCOLL_COLL_BCAST) {
        in_active = 1;
        out_active = std::max(1, L_ - 1);
    }
    if (coll_ == GPUCOLL_COLL_REDUCE) out_active = 1;
    e.us = (N_ > 1 ? verdict() : 0) + cpu(p_.d2h.latency_us, in_active) +
           us(in, rate(p_.d2h, in_active)) + host + cpu(p_.h2d.latency_us, out_active) +
           us(out, rate(p_.h2d, out_active));
    e.syncs = saturated(steps);
    e.recv = lb;
    return e;
}

// A communicator of one rank: a local copy of the result (bcast: nothing).
Estimate Model::single_rank() const {
    Estimate e;
    e.us = overhead() + (coll_ == GPUCOLL_COLL_BCAST ? 0 : copies(1, 0, 2 * S_, 0));
    return e;
}

// The algorithms the selection table (intra/selection.cc) has for coll, on
// one node or between nodes.
bool in_table(gpucoll_coll_t coll, gpucoll_algorithm_t algo, bool one_node) {
    if (algo == GPUCOLL_ALGO_STAGED) return true;
    if (!one_node) {
        if (algo == GPUCOLL_ALGO_HIER)
            return coll == GPUCOLL_COLL_ALLREDUCE || coll == GPUCOLL_COLL_BCAST;
        return algo == GPUCOLL_ALGO_LEADER && coll != GPUCOLL_COLL_BCAST;
    }
    switch (coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            return algo == GPUCOLL_ALGO_ONE_SHOT || algo == GPUCOLL_ALGO_TWO_SHOT ||
                   algo == GPUCOLL_ALGO_RING;
        case GPUCOLL_COLL_REDUCE_SCATTER:
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
        case GPUCOLL_COLL_ALLGATHER:
            return algo == GPUCOLL_ALGO_DIRECT || algo == GPUCOLL_ALGO_RING;
        case GPUCOLL_COLL_REDUCE:
            return algo == GPUCOLL_ALGO_DIRECT;
        case GPUCOLL_COLL_BCAST:
            return algo == GPUCOLL_ALGO_DIRECT || algo == GPUCOLL_ALGO_CHAIN;
        default:
            return false;
    }
}

Estimate estimate(const Model& m, gpucoll_coll_t coll, gpucoll_algorithm_t algo) {
    const bool rs =
        coll == GPUCOLL_COLL_REDUCE_SCATTER || coll == GPUCOLL_COLL_REDUCE_SCATTER_BLOCK;
    switch (algo) {
        case GPUCOLL_ALGO_STAGED:
            return m.staged();
        case GPUCOLL_ALGO_ONE_SHOT:
            return m.one_shot();
        case GPUCOLL_ALGO_TWO_SHOT:
            return m.two_shot();
        case GPUCOLL_ALGO_RING:
            return coll == GPUCOLL_COLL_ALLREDUCE ? m.allreduce_ring()
                   : rs                           ? m.reduce_scatter_ring()
                                                  : m.allgather_ring();
        case GPUCOLL_ALGO_DIRECT:
            return rs                               ? m.reduce_scatter_direct()
                   : coll == GPUCOLL_COLL_REDUCE    ? m.reduce_direct()
                   : coll == GPUCOLL_COLL_ALLGATHER ? m.allgather_direct()
                                                    : m.bcast_direct();
        case GPUCOLL_ALGO_CHAIN:
            return m.bcast_chain();
        case GPUCOLL_ALGO_HIER:
            return coll == GPUCOLL_COLL_ALLREDUCE ? m.allreduce_hier() : m.bcast_hier();
        default:  // leader
            return coll == GPUCOLL_COLL_ALLREDUCE   ? m.allreduce_leader()
                   : coll == GPUCOLL_COLL_ALLGATHER ? m.allgather_leader()
                   : coll == GPUCOLL_COLL_REDUCE    ? m.reduce_leader()
                                                    : m.reduce_scatter_leader();
    }
}

// --------------------------------------------------------------- presets

void set(LinkCost* l, double latency_us, double bandwidth_GBps) {
    l->latency_us = latency_us;
    l->bandwidth_GBps = bandwidth_GBps;
}

// Every number's source is in docs/cost-model.md, section "Presets".
ModelParams h100_nvswitch() {
    ModelParams p;
    p.name = "h100-nvswitch";
    p.source =
        "docs/cost-model.md: 8x H100 SXM5 + NVSwitch (NVLink4 450 GB/s per direction), 8x "
        "ConnectX-7 400 Gb/s; device rates measured (docs/performance.md); latencies assumed";
    set(&p.peer, 1.0, 450);
    p.gpus_per_switch = 8;
    p.switch_uplink_GBps = 450;
    set(&p.device_copy, 2.5, 2969);
    set(&p.device_reduce, 2.5, 2858);
    set(&p.d2h, 9, 50);
    set(&p.h2d, 9, 50);
    set(&p.host_copy, 0.5, 10);
    set(&p.host_reduce, 0, 20);
    set(&p.nic, 3, 50);
    p.nics_per_node = 8;
    p.inter_via_host = false;
    p.sync_us = 3;
    p.call_overhead_us = 6;
    return p;
}

ModelParams pcie4_workstation() {
    ModelParams p;
    p.name = "pcie4-workstation";
    p.source =
        "docs/cost-model.md: GPUs two per PCIe Gen4 x16 switch, ~25 GB/s per direction peer to "
        "peer and per switch uplink, one 100 Gb/s NIC without GPUDirect; device rates and "
        "latencies assumed";
    set(&p.peer, 2.0, 25);
    p.gpus_per_switch = 2;
    p.switch_uplink_GBps = 25;
    set(&p.device_copy, 2.5, 700);
    set(&p.device_reduce, 2.5, 650);
    set(&p.d2h, 9, 12.5);
    set(&p.h2d, 9, 12.5);
    set(&p.host_copy, 0.5, 10);
    set(&p.host_reduce, 0, 20);
    set(&p.nic, 5, 12.5);
    p.nics_per_node = 1;
    p.inter_via_host = true;
    p.sync_us = 3;
    p.call_overhead_us = 6;
    return p;
}

ModelParams emu() {
    ModelParams p;
    p.name = "emu";
    p.source =
        "docs/cost-model.md: the emulated device on a 2-core VM (memcpy ~10 GB/s on one core, "
        "halved when 4 ranks share 2 cores); to be replaced by calibration";
    set(&p.peer, 0.2, 5);
    p.gpus_per_switch = 64;
    p.switch_uplink_GBps = 5;
    set(&p.device_copy, 0.5, 10);
    set(&p.device_reduce, 0.5, 10);
    set(&p.d2h, 0.5, 5);
    set(&p.h2d, 0.5, 5);
    set(&p.host_copy, 0.5, 5);
    set(&p.host_reduce, 0, 10);
    set(&p.nic, 40, 1);
    p.nics_per_node = 1;
    p.inter_via_host = true;
    p.sync_us = 3;
    p.call_overhead_us = 2;
    return p;
}

// --------------------------------------------------------------- params file

enum class Kind {
    Text,
    Latency,
    Rate,
    OptionalRate,
    Count,
    OptionalCount,
    Flag,
    Size,
    Limit,
    Mode,
    Table
};

struct Binding {
    std::string key;
    Kind kind;
    const char* help;
    double* number = nullptr;
    int* count = nullptr;
    bool* flag = nullptr;
    std::string* text = nullptr;
    ModelParams::HostTable* table = nullptr;
    // format_params leaves the key out while this link is unset (bandwidth
    // 0) or this number is 0: the per-rank-count values, most of them never
    // measured.
    const LinkCost* omit_unset = nullptr;
    bool omit_zero = false;
};

// cached: the link has a rate in cache too (operations on memory).
void bind_link(std::vector<Binding>* v, const char* name, LinkCost* l, const char* help,
               bool cached = false) {
    v->push_back({.key = std::string(name) + ".latency_us",
                  .kind = Kind::Latency,
                  .help = help,
                  .number = &l->latency_us});
    v->push_back({.key = std::string(name) + ".bandwidth_GBps",
                  .kind = Kind::Rate,
                  .help = nullptr,
                  .number = &l->bandwidth_GBps});
    if (cached)
        v->push_back({.key = std::string(name) + ".cached_GBps",
                      .kind = Kind::OptionalRate,
                      .help = nullptr,
                      .number = &l->cached_GBps});
}

// A measured host algorithm (host.<coll>, host.np<L>.<coll>): its rates are
// optional (0: not measured); omit: left out of the file while unmeasured.
void bind_host_algorithm(std::vector<Binding>* v, const std::string& name, LinkCost* l,
                         const char* help, bool omit) {
    const LinkCost* unset = omit ? l : nullptr;
    v->push_back({.key = name + ".latency_us",
                  .kind = Kind::Latency,
                  .help = help,
                  .number = &l->latency_us,
                  .omit_unset = unset});
    v->push_back({.key = name + ".bandwidth_GBps",
                  .kind = Kind::OptionalRate,
                  .help = nullptr,
                  .number = &l->bandwidth_GBps,
                  .omit_unset = unset});
    v->push_back({.key = name + ".cached_GBps",
                  .kind = Kind::OptionalRate,
                  .help = nullptr,
                  .number = &l->cached_GBps,
                  .omit_unset = unset});
}

// Every key of the file, in the order format_params writes them.
std::vector<Binding> bindings(ModelParams& p) {
    std::vector<Binding> v;
    v.push_back({.key = "name", .kind = Kind::Text, .help = "the machine", .text = &p.name});
    v.push_back({.key = "source",
                 .kind = Kind::Text,
                 .help = "where the numbers come from",
                 .text = &p.source});
    v.push_back({.key = "call_overhead_us",
                 .kind = Kind::Latency,
                 .help = "fixed cost of an accelerated call (post, agreement, completion)",
                 .number = &p.call_overhead_us});
    v.push_back({.key = "sync_us",
                 .kind = Kind::Latency,
                 .help = "one flag handshake between two ranks of a node",
                 .number = &p.sync_us});
    bind_link(&v, "peer", &p.peer,
              "one GPU's link to its peers, per direction, shared by all its peer traffic "
              "(latency: added to each operation that reads a peer)");
    v.push_back({.key = "gpus_per_switch",
                 .kind = Kind::Count,
                 .help = "GPUs behind one switch, ranks in order (NVSwitch: the whole node)",
                 .count = &p.gpus_per_switch});
    v.push_back({.key = "switch_uplink_GBps",
                 .kind = Kind::Rate,
                 .help = "one switch's link to the host bridge, per direction, shared by the "
                         "traffic between switches",
                 .number = &p.switch_uplink_GBps});
    bind_link(&v, "device_copy", &p.device_copy,
              "one copy on a rank's stream: fixed cost; device memory traffic (read + write); "
              "cached: the traffic rate while the working set fits in cache_bytes (0: none)",
              true);
    bind_link(&v, "device_reduce", &p.device_reduce,
              "one reduction kernel: fixed cost; device memory traffic (sources + result)", true);
    v.push_back({.key = "peer_local_memory",
                 .kind = Kind::Flag,
                 .help = "1: peers' memory is the device's own memory, read by the same engine "
                         "(emu): peer bytes are traffic of the operation at its rate; 0: a link",
                 .flag = &p.peer_local_memory});
    v.push_back({.key = "cache_bytes",
                 .kind = Kind::Limit,
                 .help = "cache the operations of a node's ranks share; a call whose working set "
                         "is W moves min(1, cache/W) of its traffic at the cached rates (0: none)",
                 .number = &p.cache_bytes});
    v.push_back({.key = "peer_cache_bytes",
                 .kind = Kind::Limit,
                 .help = "the cache bytes read from a peer see, when smaller (emu: memory another "
                         "core wrote, read across cores); min(1, this/W) of the peer bytes at the "
                         "cached rates (absent or 0: cache_bytes)",
                 .number = &p.peer_cache_bytes,
                 .omit_zero = true});
    v.push_back({.key = "shared_cores",
                 .kind = Kind::OptionalCount,
                 .help = "cores the device work of a node's ranks shares (emu); L ranks take "
                         "max(1, L/cores) times as long for all CPU work (0: no sharing)",
                 .count = &p.shared_cores});
    v.push_back({.key = "oversubscribed_sync_us",
                 .kind = Kind::Latency,
                 .help = "one handshake when the node's ranks outnumber shared_cores (the waiter "
                         "yields until its peer gets a core; 0: sync_us); "
                         "oversubscribed_sync.np<L>_us: measured at L = 3..8 ranks per node "
                         "(absent: this)",
                 .number = &p.oversubscribed_sync_us});
    for (size_t i = 0; i < p.oversubscribed_sync_at.size(); ++i)
        v.push_back({.key = "oversubscribed_sync.np" +
                            std::to_string(ModelParams::kHostRanksFirst + i) + "_us",
                     .kind = Kind::Latency,
                     .help = nullptr,
                     .number = &p.oversubscribed_sync_at[i],
                     .omit_zero = true});
    v.push_back({.key = "shared_write_GBps",
                 .kind = Kind::OptionalRate,
                 .help = "extra cost of writing memory a peer has read (its cached copies "
                         "invalidated), bytes per second, for the cached share (0: free)",
                 .number = &p.shared_write_GBps});
    bind_link(&v, "d2h", &p.d2h, "device to pinned host copy, per GPU, all GPUs copying at once",
              true);
    bind_link(&v, "h2d", &p.h2d, "pinned host to device copy, per GPU, all GPUs copying at once",
              true);
    bind_link(&v, "host_copy", &p.host_copy,
              "Open MPI's host algorithm inside a node: one step; bytes per rank (shared memory)",
              true);
    bind_link(&v, "host_reduce", &p.host_reduce, "host reduction: fixed cost; memory traffic",
              true);
    static const char* const kHostColls[] = {
        "allreduce", "bcast", "allgather", "reduce_scatter", "reduce_scatter_block", "reduce"};
    for (size_t c = 0; c < p.host_algorithm.size(); ++c)
        bind_host_algorithm(&v, std::string("host.") + kHostColls[c], &p.host_algorithm[c],
                            c == 0 ? "Open MPI's host algorithm of one collective on one node, "
                                     "measured: one step; lower-bound bytes per second beyond "
                                     "and in cache (bandwidth 0: host_copy and host_reduce); "
                                     "host.np<L>.<collective>.*: measured at L = 3..8 ranks "
                                     "per node (absent: these); host.np<L>.<collective>.table_us: "
                                     "measured point by point at L = 2..8, 'bytes:us' pairs with "
                                     "sizes increasing, which replace the rates for a staged call "
                                     "on one node (log-log between the points; beyond the last, "
                                     "in proportion to the size)"
                                   : nullptr,
                            false);
    for (size_t i = 0; i < p.host_algorithm_at.size(); ++i)
        for (size_t c = 0; c < p.host_algorithm_at[i].size(); ++c)
            bind_host_algorithm(
                &v,
                "host.np" + std::to_string(ModelParams::kHostRanksFirst + i) + "." + kHostColls[c],
                &p.host_algorithm_at[i][c], nullptr, true);
    for (size_t i = 0; i < p.host_table.size(); ++i)
        for (size_t c = 0; c < p.host_table[i].size(); ++c)
            v.push_back({.key = "host.np" + std::to_string(ModelParams::kTableRanksFirst + i) +
                                "." + kHostColls[c] + ".table_us",
                         .kind = Kind::Table,
                         .help = nullptr,  // host.allreduce's says what the tables are
                         .table = &p.host_table[i][c]});
    for (size_t i = 0; i < p.algo_table.size(); ++i)
        for (size_t c = 0; c < p.algo_table[i].size(); ++c)
            for (size_t a = 0; a < p.algo_table[i][c].size(); ++a) {
                // gpucoll_algorithm_name's, which lives outside this library
                static const char* const kAlgos[] = {"one_shot", "two_shot", "ring", "direct",
                                                     "chain"};
                static_assert(std::size(kAlgos) ==
                              ModelParams::kTableAlgoLast - ModelParams::kTableAlgoFirst + 1);
                const auto algo =
                    static_cast<gpucoll_algorithm_t>(ModelParams::kTableAlgoFirst + a);
                if (!in_table(static_cast<gpucoll_coll_t>(c), algo, true)) continue;
                const bool first = i == 0 && c == 0 && a == 0;
                v.push_back(
                    {.key = "algo.np" + std::to_string(ModelParams::kTableRanksFirst + i) + "." +
                            kHostColls[c] + "." + kAlgos[a] + ".table_us",
                     .kind = Kind::Table,
                     .help = first ? "an accelerated algorithm on one node of L = 2..8 ranks, "
                                     "measured at small sizes: 'bytes:us' pairs with sizes "
                                     "increasing; up to the last size the time is the table's "
                                     "(log-log between the points), beyond it the last time "
                                     "plus what the formulas add from there (the formulas' "
                                     "fixed part replaced by measurement; absent: the formulas)"
                                   : nullptr,
                     .table = &p.algo_table[i][c][a]});
            }
    bind_link(&v, "nic", &p.nic, "one NIC, per direction (latency: one transfer round via UCX)");
    v.push_back({.key = "nics_per_node",
                 .kind = Kind::Count,
                 .help = "NICs of a node (rails share them when fewer than ranks)",
                 .count = &p.nics_per_node});
    v.push_back({.key = "inter_via_host",
                 .kind = Kind::Flag,
                 .help = "1: device memory between nodes staged through pinned host memory; 0: "
                         "GPUDirect RDMA",
                 .flag = &p.inter_via_host});
    v.push_back({.key = "chunk_bytes",
                 .kind = Kind::Size,
                 .help = "pipeline chunk inside a node (coll_gpucoll_chunk_size)",
                 .number = &p.chunk_bytes});
    v.push_back({.key = "inter_chunk_bytes",
                 .kind = Kind::Size,
                 .help = "pipeline chunk between nodes (coll_gpucoll_inter_chunk_size)",
                 .number = &p.inter_chunk_bytes});
    v.push_back({.key = "inter_direct_max_bytes",
                 .kind = Kind::Limit,
                 .help = "allreduce between nodes: direct up to this many bytes per member",
                 .number = &p.inter_direct_max_bytes});
    v.push_back({.key = "inter_bcast",
                 .kind = Kind::Mode,
                 .help = "bcast between nodes (coll_gpucoll_inter_bcast): 0 auto, 1 tree, 2 chain",
                 .count = &p.inter_bcast});
    return v;
}

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool parse_table(const std::string& text, ModelParams::HostTable* out, std::string* why);

// Stores text as f's value, or says in *why what f wants.
bool parse_value(const Binding& f, const std::string& text, std::string* why) {
    if (f.kind == Kind::Text) {
        *f.text = text;
        return true;
    }
    if (f.kind == Kind::Table) return parse_table(text, f.table, why);
    double v = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    const bool number = !text.empty() && ec == std::errc() && ptr == end && std::isfinite(v);
    const bool whole = number && v == std::floor(v);
    // Bounds far beyond any machine, so that every prediction stays a finite
    // number of microseconds (bytes up to 2^48 over a million ranks).
    constexpr double kMostUs = 1e9, kLeastGBps = 1e-6, kMostGBps = 1e6, kMostCount = 1e6;
    constexpr double kMostBytes = 1125899906842624.0;  // 2^50
    const double most_chunk = static_cast<double>(GPUCOLL_INTER_CHUNK_MAX_BYTES);
    const bool rate = number && v >= kLeastGBps && v <= kMostGBps;
    bool ok = false;
    switch (f.kind) {
        case Kind::Latency:
            ok = number && v >= 0 && v <= kMostUs;
            *why = "a time in microseconds in [0, 1e9]";
            break;
        case Kind::Rate:
            ok = rate;
            *why = "a bandwidth in GB/s in [1e-6, 1e6]";
            break;
        case Kind::OptionalRate:
            ok = rate || (number && v == 0);
            *why = "a bandwidth in GB/s in [1e-6, 1e6], or 0 (none)";
            break;
        case Kind::Count:
            ok = whole && v >= 1 && v <= kMostCount;
            *why = "a whole number in [1, 1000000]";
            break;
        case Kind::OptionalCount:
            ok = whole && v >= 0 && v <= kMostCount;
            *why = "a whole number in [0, 1000000]";
            break;
        case Kind::Flag:
            ok = whole && (v == 0 || v == 1);
            *why = "0 or 1";
            break;
        case Kind::Mode:
            ok = whole && v >= 0 && v <= 2;
            *why = "0, 1 or 2";
            break;
        case Kind::Size:  // a chunk: the runtime bounds the one between nodes the same way
            ok = whole && v >= 1 && v <= most_chunk;
            *why = "a whole number of bytes in [1, " +
                   std::to_string(GPUCOLL_INTER_CHUNK_MAX_BYTES) + "]";
            break;
        default:  // Limit
            ok = whole && v >= 0 && v <= kMostBytes;
            *why = "a whole number of bytes in [0, 1125899906842624]";
    }
    if (!ok) return false;
    if (f.count != nullptr)
        *f.count = static_cast<int>(v);
    else if (f.flag != nullptr)
        *f.flag = v == 1;
    else
        *f.number = v;
    return true;
}

// "bytes:us bytes:us ...": whole sizes in [1, 2^50], increasing; times in
// (0, 1e9]; 1 to kTablePointsMax points.
bool parse_table(const std::string& text, ModelParams::HostTable* out, std::string* why) {
    *why = "1 to " + std::to_string(ModelParams::kTablePointsMax) +
           " 'bytes:us' pairs, whole sizes in [1, 2^50] increasing, times in (0, 1e9]";
    ModelParams::HostTable t;
    std::istringstream in(text);
    std::string pair;
    while (in >> pair) {
        const size_t colon = pair.find(':');
        if (colon == std::string::npos) return false;
        double b = 0, us = 0;
        const char* bend = pair.data() + colon;
        const char* uend = pair.data() + pair.size();
        const auto rb = std::from_chars(pair.data(), bend, b);
        const auto ru = std::from_chars(bend + 1, uend, us);
        if (rb.ec != std::errc() || rb.ptr != bend || ru.ec != std::errc() || ru.ptr != uend)
            return false;
        if (!std::isfinite(b) || b != std::floor(b) || b < 1 || b > 1125899906842624.0 ||
            !std::isfinite(us) || us <= 0 || us > 1e9 || (!t.empty() && b <= t.back().first) ||
            t.size() == ModelParams::kTablePointsMax)
            return false;
        t.emplace_back(b, us);
    }
    if (t.empty()) return false;
    *out = std::move(t);
    return true;
}

std::string format_number(double v) {
    char buf[64];
    const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc() ? std::string(buf, ptr) : "nan";
}

std::string format_value(const Binding& f) {
    switch (f.kind) {
        case Kind::Text:
            return *f.text;
        case Kind::Table: {
            std::string out;
            for (const auto& [bytes, us] : *f.table)
                out += (out.empty() ? "" : " ") + format_number(bytes) + ":" + format_number(us);
            return out;
        }
        case Kind::Count:
        case Kind::OptionalCount:
        case Kind::Mode:
            return std::to_string(*f.count);
        case Kind::Flag:
            return *f.flag ? "1" : "0";
        default:
            return format_number(*f.number);
    }
}

}  // namespace

// --------------------------------------------------------------- public

double all_peers_GBps(const ModelParams& params, int n) {
    const int g = std::min(std::max(params.gpus_per_switch, 1), std::max(n, 1));
    if (n <= g) return params.peer.bandwidth_GBps;
    // Of the bytes a GPU reads, (n-g)/(n-1) come from other switches; its
    // switch's g GPUs share one uplink for them.
    const double share = params.switch_uplink_GBps * (n - 1) / (static_cast<double>(g) * (n - g));
    return std::min(params.peer.bandwidth_GBps, share);
}

double lower_bound_bytes(gpucoll_coll_t coll, size_t bytes, int64_t n) {
    if (!modelled(coll)) return -1;
    if (n < 2) return 0;
    const double S = static_cast<double>(bytes);
    switch (coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            return 2.0 * (n - 1) * S / n;
        case GPUCOLL_COLL_BCAST:
        case GPUCOLL_COLL_REDUCE:
            return S;
        default:  // allgather, reduce_scatter(_block): of the whole buffer
            return 1.0 * (n - 1) * S / n;
    }
}

double busbw_factor(gpucoll_coll_t coll, int64_t n) {
    if (n < 1) return 0;
    switch (coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            return 2.0 * (n - 1) / n;
        case GPUCOLL_COLL_BCAST:
        case GPUCOLL_COLL_REDUCE:
            return 1;
        default:
            return 1.0 * (n - 1) / n;
    }
}

// The measured table of algo at this shape's rank count on one node
// (ModelParams::algo_table), nullptr where there is none.
const ModelParams::HostTable* algo_table(const ModelParams& p, gpucoll_coll_t coll,
                                         gpucoll_algorithm_t algo, Shape shape) {
    const int L = shape.ranks_per_node;
    if (shape.nodes != 1 || L < ModelParams::kTableRanksFirst || L > ModelParams::kHostRanksLast ||
        algo < ModelParams::kTableAlgoFirst || algo > ModelParams::kTableAlgoLast || coll < 0 ||
        coll >= 6)
        return nullptr;
    return &p.algo_table[static_cast<size_t>(L - ModelParams::kTableRanksFirst)]
                        [static_cast<size_t>(coll)]
                        [static_cast<size_t>(algo - ModelParams::kTableAlgoFirst)];
}

Prediction predict(gpucoll_coll_t coll, gpucoll_algorithm_t algo, size_t bytes, Shape shape,
                   const ModelParams& params) {
    Prediction out;
    if (!modelled(coll) || shape.ranks_per_node < 1 || shape.nodes < 1 ||
        !in_table(coll, algo, shape.nodes == 1))
        return out;
    const Model model(params, coll, algo, static_cast<double>(bytes), shape);
    const int64_t ranks = int64_t{shape.ranks_per_node} * shape.nodes;
    Estimate e = ranks == 1 && algo != GPUCOLL_ALGO_STAGED ? model.single_rank()
                                                           : estimate(model, coll, algo);
    if (const ModelParams::HostTable* t = algo_table(params, coll, algo, shape);
        t != nullptr && !t->empty() && ranks > 1 && std::isfinite(e.us)) {
        const double S = static_cast<double>(bytes), last = t->back().first;
        if (S <= last) {
            e.us = table_us(*t, S);
        } else {  // the measured time, plus what the formulas add beyond it
            const Model at(params, coll, algo, last, shape);
            const double more = e.us - estimate(at, coll, algo).us;
            e.us = t->back().second + (std::isfinite(more) ? std::max(0.0, more) : more);
        }
    }
    out.applicable = true;
    out.time_us = e.us;
    out.syncs = e.syncs;
    out.recv_bytes = e.recv;
    if (bytes > 0 && e.us > 0) {
        out.algbw_GBps = static_cast<double>(bytes) / (e.us * 1e3);
        out.busbw_GBps = out.algbw_GBps * busbw_factor(coll, ranks);
    }
    return out;
}

std::vector<Choice> rank_algorithms(gpucoll_coll_t coll, size_t bytes, Shape shape,
                                    const ModelParams& params) {
    std::vector<Choice> out;
    for (int a = GPUCOLL_ALGO_STAGED; a < GPUCOLL_ALGO_COUNT; ++a) {
        const auto algo = static_cast<gpucoll_algorithm_t>(a);
        const Prediction p = predict(coll, algo, bytes, shape, params);
        if (p.applicable) out.push_back({algo, p});
    }
    // NaN compares false with everything: sorted among the others it breaks
    // the ordering (any order, the fastest lost). Finite first, by time.
    std::stable_sort(out.begin(), out.end(), [](const Choice& x, const Choice& y) {
        const bool fx = std::isfinite(x.prediction.time_us);
        const bool fy = std::isfinite(y.prediction.time_us);
        if (fx != fy) return fx;
        return fx && x.prediction.time_us < y.prediction.time_us;
    });
    return out;
}

std::vector<std::string> preset_names() { return {"h100-nvswitch", "pcie4-workstation", "emu"}; }

bool preset(const std::string& name, ModelParams* out) {
    if (name == "h100-nvswitch")
        *out = h100_nvswitch();
    else if (name == "pcie4-workstation")
        *out = pcie4_workstation();
    else if (name == "emu")
        *out = emu();
    else
        return false;
    return true;
}

bool parse_params(const std::string& text, const std::string& origin, ModelParams* params,
                  std::string* error) {
    ModelParams p = *params;
    std::vector<Binding> fields = bindings(p);
    std::vector<int> set_on(fields.size(), 0);  // line that set each key
    std::istringstream in(text);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        const std::string t = trim(line);
        if (t.empty() || t[0] == '#') continue;
        const std::string at = origin + ":" + std::to_string(number) + ": ";
        const size_t eq = t.find('=');
        const std::string key = trim(t.substr(0, eq));
        if (eq == std::string::npos || key.empty()) {
            *error = at + "expected 'key = value', got '" + t + "'";
            return false;
        }
        const auto f = std::find_if(fields.begin(), fields.end(),
                                    [&](const Binding& b) { return b.key == key; });
        if (f == fields.end()) {
            *error = at + "unknown key '" + key + "'";
            return false;
        }
        int& first = set_on[static_cast<size_t>(f - fields.begin())];
        if (first != 0) {
            *error = at + "'" + key + "' set twice (first on line " + std::to_string(first) + ")";
            return false;
        }
        first = number;
        std::string why;
        const std::string value = trim(t.substr(eq + 1));
        if (!parse_value(*f, value, &why)) {
            *error = at + "'" + key + "' wants " + why + ", got '" + value + "'";
            return false;
        }
    }
    *params = p;
    return true;
}

bool load_params(const std::string& path, ModelParams* params, std::string* error) {
    std::string text;
    if (!read_text_file(path, &text, error)) return false;
    // An empty file would mean "the preset" without a word: a wrong path or
    // a truncated copy, more likely than a wish.
    std::istringstream in(text);
    std::string line;
    bool sets = false;
    while (!sets && std::getline(in, line)) sets = !trim(line).empty() && trim(line)[0] != '#';
    if (!sets) {
        *error = "'" + path + "' sets no parameter (empty?); to use a preset, name it";
        return false;
    }
    return parse_params(text, path, params, error);
}

std::string format_params(const ModelParams& params) {
    ModelParams p = params;
    for (std::string* s : {&p.name, &p.source})  // one line each
        std::replace(s->begin(), s->end(), '\n', ' ');
    std::string out =
        "# gpucoll cost model parameters (docs/cost-model.md): key = value, times in "
        "microseconds, bandwidths in GB/s (1e9 bytes/s)\n";
    const char* pending = nullptr;  // the help of a group whose first key is left out
    for (const Binding& f : bindings(p)) {
        const bool omitted = (f.omit_unset != nullptr && f.omit_unset->bandwidth_GBps == 0) ||
                             (f.omit_zero && *f.number == 0) ||
                             (f.table != nullptr && f.table->empty());
        if (omitted) {
            if (f.help != nullptr) pending = f.help;
            continue;
        }
        if (const char* help = f.help != nullptr ? f.help : pending; help != nullptr)
            out += "\n# " + std::string(help) + "\n";
        pending = nullptr;
        out += f.key + " = " + format_value(f) + "\n";
    }
    return out;
}

}  // namespace gpucoll::topo

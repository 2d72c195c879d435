// cost_model.h - how long each of gpucoll's algorithms takes on a machine,
// predicted from a handful of link costs (latency + bytes / bandwidth), so
// that the selection table can rank algorithms instead of comparing sizes
// with fixed thresholds. Pure functions over parameters: nothing here looks
// at the machine. The formulas, the parameters and the sources of the
// presets are in docs/cost-model.md; each formula follows what the
// algorithm's file does (its steps, what each rank reads over which link,
// where it reduces, how it chunks), not what the textbook algorithm does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpucoll.h"

namespace gpucoll::topo {

// One kind of transfer or operation: a fixed cost, then bytes at a rate.
// 1 GB/s is 1e9 bytes per second, 1e3 bytes per microsecond.
struct LinkCost {
    double latency_us = 0;
    double bandwidth_GBps = 1;
    // The rate while the call's working set fits in the node's cache
    // (ModelParams::cache_bytes); 0: bandwidth_GBps at every size. Used by
    // the device, staging and host operations, not by links.
    double cached_GBps = 0;
};

struct ModelParams {
    // Inside a node, GPU to GPU (CUDA IPC: a rank reads its peers' memory).
    // peer: one GPU's own link (NVLink port, PCIe slot), per direction. All
    // peer traffic of that GPU shares it, so reading all its peers at once
    // goes no faster than reading one (what NVSwitch gives). latency_us is
    // added to every operation that reads a peer.
    LinkCost peer;
    // GPUs behind one switch, ranks placed in order (rank r under switch
    // r / gpus_per_switch). Traffic between switches crosses the switches'
    // uplinks to the host bridge, switch_uplink_GBps each per direction,
    // shared by every flow that crosses it. NVSwitch: the whole node.
    int gpus_per_switch = 1;
    double switch_uplink_GBps = 1;
    // The device: fixed cost of one copy or reduction issued on a rank's
    // stream, and device memory traffic (bytes read + bytes written) per
    // second, as perf/gpucoll_kernel_bench reports it.
    LinkCost device_copy;
    LinkCost device_reduce;
    // The device's memory is the memory its peers read too, through the same
    // engine (emu: CPU copies in shared host memory): bytes read from a peer
    // are memory traffic of the operation at its own rate, one after the
    // other with the local traffic; the peer link's bandwidth and pattern
    // (switches, fans) play no part, its latency still does. false (GPUs):
    // an operation runs at the slower of its link and its local memory.
    bool peer_local_memory = false;
    // Bytes of cache the operations of a node's ranks share (emu: the CPU's
    // last-level cache; GPUs: 0, no cache term). A call whose working set
    // (what all ranks of the node touch) is W moves min(1, cache/W) of its
    // traffic at the cached rates (LinkCost::cached_GBps), the rest at the
    // memory rates (bandwidth_GBps).
    double cache_bytes = 0;
    // The cache that bytes read from a peer see (emu: memory another core
    // has just written, read across cores), when it is smaller than
    // cache_bytes: a call whose working set is W reads min(1, this/W) of its
    // peer bytes at the cached rates. On the project VM the copy rate of
    // such reads falls at 12-16 MiB of working set, where a process copying
    // its own buffers keeps its rate to 24 MiB. 0: cache_bytes.
    double peer_cache_bytes = 0;
    // Cores the device work of a node's ranks shares (emu: the machine's
    // cores); 0: every rank's device works on its own. When a ranks of the
    // node work at once on c cores, their copies, reductions, staging, host
    // algorithm and call overhead take max(1, a/c) times as long (time
    // slicing); a is the node's rank count except where an algorithm keeps
    // ranks idle (reduce direct: the root alone; bcast direct: the
    // non-roots; bcast chain: the stages in flight). Rates and fixed costs
    // are those measured with all c cores busy. Not applied to the network.
    int shared_cores = 0;
    // One handshake when the node's ranks outnumber shared_cores: the waiter
    // spins and yields until the rank it waits for gets a core (a context
    // switch or more); used instead of sync_us then. 0: sync_us.
    double oversubscribed_sync_us = 0;
    // The same measured at L = 3..8 ranks per node
    // (oversubscribed_sync_at[L - kHostRanksFirst]): how long a waiter waits
    // for its peer's turn on a core depends on how many ranks share them.
    // 0: oversubscribed_sync_us.
    std::array<double, 6> oversubscribed_sync_at{};
    // Writing memory that a peer has read (emu: the other core's cached
    // copies are invalidated line by line) costs these extra bytes per
    // second, for the share of the traffic in cache (cache_bytes). 0: free.
    double shared_write_GBps = 0;
    // Staging: device <-> pinned host copies, per GPU while every GPU of the
    // node copies at once.
    LinkCost d2h;
    LinkCost h2d;
    // Open MPI's host algorithm on staged buffers: one step and the bytes a
    // rank moves through shared memory (host_copy), host reductions
    // (host_reduce: memory traffic).
    LinkCost host_copy;
    LinkCost host_reduce;
    // Open MPI's host algorithm of one collective on one node, measured
    // (indexed by gpucoll_coll_t, allreduce to reduce): one step, and the
    // lower bound's bytes per second in cache (cached_GBps) and beyond,
    // reductions included; its choice of algorithm is its own (it may move
    // far more than the bound). bandwidth_GBps 0: host_copy and host_reduce.
    using HostAlgorithms = std::array<LinkCost, 6>;
    static constexpr HostAlgorithms kUnmeasured = {
        {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}};
    HostAlgorithms host_algorithm = kUnmeasured;
    // The same measured at other rank counts of one node: Open MPI picks
    // its algorithm by rank count (and size), so one rate per collective
    // fitted at 2 ranks misses what it does at 3 or 4.
    // host_algorithm_at[L - kHostRanksFirst][coll] for L = 3..8 ranks per
    // node; where its bandwidth_GBps is 0, host_algorithm applies.
    static constexpr int kHostRanksFirst = 3, kHostRanksLast = 8;
    static_assert(std::tuple_size_v<decltype(oversubscribed_sync_at)> ==
                  kHostRanksLast - kHostRanksFirst + 1);
    std::array<HostAlgorithms, kHostRanksLast - kHostRanksFirst + 1> host_algorithm_at = [] {
        std::array<HostAlgorithms, kHostRanksLast - kHostRanksFirst + 1> all;
        all.fill(kUnmeasured);
        return all;
    }();
    // The same as measured, point by point: (bytes, us) of one collective at
    // L = 2..8 ranks on one node (host_table[L - kTableRanksFirst][coll]),
    // sizes increasing. Open MPI switches algorithms by size, which one rate
    // cannot follow; where a count's table has points, a one-node staged
    // call's host part is read from it (log-log between the points around
    // the size; below the first, the first; beyond the last, in proportion
    // to the size) instead of the rates above.
    using HostTable = std::vector<std::pair<double, double>>;
    static constexpr int kTableRanksFirst = 2;
    static constexpr size_t kTablePointsMax = 64;
    std::array<std::array<HostTable, 6>, kHostRanksLast - kTableRanksFirst + 1> host_table;
    // An accelerated algorithm's time on one node, measured at small sizes:
    // algo_table[L - kTableRanksFirst][coll][algo - kTableAlgoFirst], the
    // one-node algorithms one_shot to chain, same form as host_table. Where
    // a count's table has points, a call up to the last point's size takes
    // the table's time (log-log between points; below the first, the
    // first), and a larger one the last point's time plus what the formulas
    // add from that size to this one. The formulas count an algorithm's
    // waits; what a wait costs depends on how many peers it waits for at
    // once and, with ranks time-sliced on shared cores, on the scheduler,
    // which one sync_us cannot say (NCCL keeps a base latency per
    // algorithm for the same reason). Not used between nodes.
    static constexpr int kTableAlgoFirst = GPUCOLL_ALGO_ONE_SHOT;
    static constexpr int kTableAlgoLast = GPUCOLL_ALGO_CHAIN;
    using AlgoTables = std::array<std::array<HostTable, kTableAlgoLast - kTableAlgoFirst + 1>, 6>;
    std::array<AlgoTables, kHostRanksLast - kTableRanksFirst + 1> algo_table;
    // Between nodes: one NIC, per direction; latency_us: one transfer round
    // through UCX (post, match, complete).
    LinkCost nic;
    int nics_per_node = 1;
    // Device memory between nodes goes through pinned host memory, chunk by
    // chunk (no GPUDirect RDMA); false: straight from device memory.
    bool inter_via_host = true;
    // One flag handshake between two ranks of a node: a step signalled and
    // seen by its waiter.
    double sync_us = 0;
    // Fixed cost of a call on the accelerated path: classification, posting
    // the buffers, bookkeeping of the agreement, completion.
    double call_overhead_us = 0;
    // gpucoll's configuration that shapes the algorithms (library defaults).
    double chunk_bytes = 1 << 20;              // coll_gpucoll_chunk_size
    double inter_chunk_bytes = 1 << 20;        // coll_gpucoll_inter_chunk_size
    double inter_direct_max_bytes = 16 << 10;  // coll_gpucoll_inter_direct_max
    int inter_bcast = 0;                       // coll_gpucoll_inter_bcast: 0 auto, 1 tree, 2 chain
    std::string name;
    std::string source;  // where the numbers come from
};

// Presets for machines described in docs/cost-model.md: "h100-nvswitch",
// "pcie4-workstation", "emu". False for an unknown name.
bool preset(const std::string& name, ModelParams* out);
std::vector<std::string> preset_names();

// A params file: "key = value" lines (value: the rest of the line), blank
// lines and lines starting with '#' ignored. Keys the file does not name
// keep the value *params had, so a file can refine a preset. Errors (unknown
// key, a key twice, a value out of range) name the file and line. *params is
// changed only on success.
bool load_params(const std::string& path, ModelParams* params, std::string* error);
bool parse_params(const std::string& text, const std::string& origin, ModelParams* params,
                  std::string* error);
// Every key, with a comment saying what it means; load_params reads it back
// to the same values.
std::string format_params(const ModelParams& params);

// Ranks of a communicator: the same number on every node, one GPU each.
struct Shape {
    int ranks_per_node = 1;
    int nodes = 1;
};

struct Prediction {
    bool applicable = false;  // false: the table has no such algorithm for this call
    double time_us = -1;
    double algbw_GBps = 0;  // bytes / time
    double busbw_GBps = 0;  // algbw x busbw_factor (nccl-tests' convention)
    // Bytes the busiest rank receives over links (peer memory it reads,
    // network receives), per call; comparable with lower_bound_bytes.
    double recv_bytes = 0;
    // Waits for a peer's flag that lie on the critical path.
    int syncs = 0;
};

// bytes: as call_bytes() in intra/selection.cc (allgather and
// reduce_scatter(_block): the whole buffer of all ranks). The bcast and
// reduce root is rank 0; reduce_scatter blocks are equal; buffers are not in
// place.
Prediction predict(gpucoll_coll_t coll, gpucoll_algorithm_t algo, size_t bytes, Shape shape,
                   const ModelParams& params);

// The bytes each of n ranks must at least send and receive: allreduce
// 2(n-1)/n x bytes, reduce_scatter(_block) and allgather (n-1)/n x bytes,
// bcast and reduce bytes; 0 for n < 2; -1 for collectives not modelled.
double lower_bound_bytes(gpucoll_coll_t coll, size_t bytes, int64_t n);

// nccl-tests' bus bandwidth factor: allreduce 2(n-1)/n, allgather and
// reduce_scatter (n-1)/n, bcast and reduce 1.
double busbw_factor(gpucoll_coll_t coll, int64_t n);

// What one GPU gets reading all its n-1 peers at once while every GPU does
// the same: its own link, or its share of its switch's uplink.
double all_peers_GBps(const ModelParams& params, int n);

struct Choice {
    gpucoll_algorithm_t algo;
    Prediction prediction;
};
// The applicable algorithms (staged included), fastest first; predictions
// that are not finite (parameters not read through parse_params, or beyond
// what a double holds) come last, in algorithm order.
std::vector<Choice> rank_algorithms(gpucoll_coll_t coll, size_t bytes, Shape shape,
                                    const ModelParams& params);

}  // namespace gpucoll::topo

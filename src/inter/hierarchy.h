// hierarchy.h - a communicator that spans nodes: which rank is on which
// node, the groups that talk between nodes (rails: the ranks of one local
// rank; leaders: local rank 0 of every node), and the per-call agreement
// between nodes (every node's verdict on the call, exchanged over a group).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gpucoll.h"
#include "inter/group.h"
#include "inter/group_algorithms.h"
#include "intra/shared_segment.h"

namespace gpucoll::inter {

struct Topology {
    int rank = 0, size = 0;
    int node = 0, local = 0;                // mine
    std::vector<int> node_of, local_of;     // per rank
    std::vector<std::vector<int>> members;  // per node: its ranks, in rank order
    std::vector<std::string> hosts;         // per node: its host name (or GPUCOLL_HOSTID)
    int min_ppn = 0, max_ppn = 0;
    int nodes() const { return static_cast<int>(members.size()); }
    bool equal_ppn() const { return min_ppn == max_ppn; }
    // From every rank's node identity (equal strings: one node).
    static Topology from_identities(const std::vector<std::string>& ids, int rank);
};

// A node's answer on one call, exchanged between nodes. Codes by
// precedence: any decline stages the call everywhere; else a refusal or a
// mismatch fails it everywhere; else a rank whose buffers are on another GPU
// than the communicator's makes every rank set it up again; else it runs.
enum VerdictCode : uint32_t {
    kAccelerate = 1,
    kRebind = 2,
    kMismatch = 3,
    kRefuse = 4,
    kDecline = 5
};
struct Verdict {
    uint32_t code = kAccelerate;
    int32_t rank = -1;  // the rank whose post decided a failure
    intra::CallSignature sig{};
};

// The verdict exchange of a call in flight (nonblocking and persistent
// calls): started once this node's verdict is known, tested without
// waiting. Ends what it still has pending when destroyed.
struct VerdictExchange {
    Group* group = nullptr;
    // Sent from here; never freed while a send may still read it (a
    // destroyed exchange whose send had not completed leaks it).
    std::unique_ptr<Verdict> mine = std::make_unique<Verdict>();
    std::vector<Verdict> theirs;
    std::vector<Request> reqs;
    bool started = false;
    bool known = false;  // result is the call's verdict
    Verdict result;
    VerdictExchange() = default;
    VerdictExchange(const VerdictExchange&) = delete;
    VerdictExchange& operator=(const VerdictExchange&) = delete;
    ~VerdictExchange();
};

class Hierarchy {
public:
    ~Hierarchy();  // gives the communicator id back

    // Collective over the whole communicator (bs). *out stays null, on every
    // rank, when the transport cannot serve it (why: logged by the caller
    // from last_error()). node_abort: the node communicator's abort word.
    // ordinal: this rank's GPU (its NIC, for rails), -1 for none yet.
    static Status create(const gpucoll_bootstrap_t& bs, const Topology& topo,
                         const gpucoll_comm_config_t& config, int ordinal,
                         const std::atomic<uint64_t>* node_abort, std::unique_ptr<Hierarchy>* out);

    const Topology& topo() const { return topo_; }
    Group* rail() const { return rail_.get(); }        // equal ranks per node only
    Group* leaders() const { return leaders_.get(); }  // on local rank 0 only
    // The group this rank exchanges verdicts over (rail, or leaders when the
    // nodes have different numbers of ranks); nullptr: read the leader's.
    Group* verdict_group() const { return rail_ ? rail_.get() : leaders_.get(); }
    // "UCX 1.13.1, memory types: host, network device lo" (the rail).
    const std::string& description() const { return description_; }
    // The transports of this rank's endpoints to other nodes (UCX 1.14+).
    const std::string& lanes() const { return lanes_; }
    InterAlgorithm algorithm() const { return algorithm_; }
    size_t direct_max_bytes() const { return direct_max_bytes_; }

    // Sends mine to every member of the verdict group and combines theirs.
    Status exchange(uint64_t seq, const Verdict& mine, Verdict* all);
    // The same without waiting: start, then test until *done (then *all is
    // the combined verdict).
    Status start_exchange(uint64_t seq, const Verdict& mine, VerdictExchange* x);
    Status test_exchange(uint64_t seq, VerdictExchange* x, bool* done, Verdict* all);
    // Tells the other nodes that this rank failed call seq.
    void abort(uint64_t seq);
    // Bytes sent between nodes since the last call of this.
    uint64_t take_bytes_sent();

private:
    Hierarchy() = default;
    // Mine and the members' verdicts (theirs[me] unused) into one.
    Status combine(const Group& g, const Verdict& mine, const std::vector<Verdict>& theirs,
                   Verdict* out) const;
    // First: its groups' endpoints and requests are the transport's.
    std::shared_ptr<Transport> transport_;
    Topology topo_;
    std::unique_ptr<Group> rail_, leaders_;
    std::string description_, lanes_;
    std::vector<Verdict> verdicts_;  // the members' verdicts of the current call
    InterAlgorithm algorithm_ = InterAlgorithm::Auto;
    size_t direct_max_bytes_ = 0;
    uint32_t comm_id_ = 0;
    bool comm_id_held_ = false;  // in this process's set of live ids
};

}  // namespace gpucoll::inter

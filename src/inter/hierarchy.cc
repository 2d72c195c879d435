#include "inter/hierarchy.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "common/bootstrap.h"
#include "common/immortal.h"
#include "common/log_line.h"
#include "common/machine.h"
#include "core/runtime.h"
#include "intra/node_layout.h"

namespace gpucoll::inter {

namespace {

// Communicator ids are agreed among the ranks of a communicator: the
// largest next id of any of them, so it is new in each of their processes.
// Under MPI_THREAD_MULTIPLE two communicators can be created at once, read
// the same next id and agree on the same value: each process then checks
// the agreed id against its live ones, and all retry unless none collided.
std::atomic<uint32_t> g_next_comm_id{1};
std::mutex g_live_ids_mutex;
// The tag ids (16 bits) of this process's hierarchies; never destroyed (a
// communicator freed at exit still finds it).
Immortal<std::set<uint32_t>> g_live_ids;

bool hold_comm_id(uint32_t id) {
    std::lock_guard lock(g_live_ids_mutex);
    return g_live_ids->insert(id).second;
}

void release_comm_id(uint32_t id) {
    std::lock_guard lock(g_live_ids_mutex);
    g_live_ids->erase(id);
}

size_t live_comm_ids() {
    std::lock_guard lock(g_live_ids_mutex);
    return g_live_ids->size();
}

// 0..63, different from thread to thread and process to process.
uint32_t retry_offset() {
    thread_local std::minstd_rand rng(static_cast<uint32_t>(
        std::hash<std::thread::id>{}(std::this_thread::get_id()) ^ static_cast<size_t>(getpid())));
    return static_cast<uint32_t>(rng() % 64);
}

// Processes of the job on this machine (faked nodes share it): the
// launcher's count where it gives one, else this node's ranks.
unsigned processes_on_machine(const Topology& topo) {
    const unsigned n = launcher_local_processes();
    return n > 0 ? n : static_cast<unsigned>(topo.members[topo.node].size());
}

}  // namespace

Topology Topology::from_identities(const std::vector<std::string>& ids, int rank) {
    Topology t;
    t.rank = rank;
    t.size = static_cast<int>(ids.size());
    std::map<std::string, int> index;  // nodes numbered by their first rank
    for (int r = 0; r < t.size; ++r) {
        auto [it, fresh] = index.emplace(ids[r], t.nodes());
        if (fresh) {
            t.members.emplace_back();
            // "BOOTID/HOSTNAME" or "hostid:NAME" (intra::node_identity)
            const std::string& id = ids[r];
            const size_t slash = id.find('/'), colon = id.find(':');
            t.hosts.push_back(slash != std::string::npos   ? id.substr(slash + 1)
                              : colon != std::string::npos ? id.substr(colon + 1)
                                                           : id);
        }
        t.node_of.push_back(it->second);
        t.local_of.push_back(static_cast<int>(t.members[it->second].size()));
        t.members[it->second].push_back(r);
    }
    t.node = t.node_of[rank];
    t.local = t.local_of[rank];
    t.min_ppn = t.size;
    for (const auto& m : t.members) {
        t.min_ppn = std::min(t.min_ppn, static_cast<int>(m.size()));
        t.max_ppn = std::max(t.max_ppn, static_cast<int>(m.size()));
    }
    return t;
}

Hierarchy::~Hierarchy() {
    // The groups first: their requests use the id's tags.
    rail_.reset();
    leaders_.reset();
    if (comm_id_held_) release_comm_id(comm_id_);
}

Status Hierarchy::create(const gpucoll_bootstrap_t& bs, const Topology& topo,
                         const gpucoll_comm_config_t& config, int ordinal,
                         const std::atomic<uint64_t>* node_abort, std::unique_ptr<Hierarchy>* out) {
    out->reset();
    // Rails: each process on the NIC nearest its GPU (unless the user chose).
    // A process that has not chosen its GPU yet leaves the NIC to UCX; set
    // up again on its GPU, it gets a transport on that GPU's NIC (the one
    // on UCX's choice stays until gpucoll_finalize).
    std::string bus_id, rail_why;
    if (Device* dev = Runtime::instance().device(); dev != nullptr && ordinal >= 0)
        (void)dev->pci_bus_id(ordinal, &bus_id);
    const std::string nic = intra::rail_net_device(config, ordinal, bus_id, &rail_why);
    const bool thread_multi = config.thread_multiple != 0 || config.progress_thread != 0;
    std::shared_ptr<Transport> transport;
    Status ts = Runtime::instance().transport(thread_multi, nic, &transport);
    if (ts != kSuccess && !nic.empty()) {  // the NIC named is unusable: UCX chooses
        // Said once per process, also without verbose output where the
        // user named it (coll_gpucoll_rail_devices).
        static std::atomic<bool> said{false};
        const bool given = config.rail_devices != nullptr && *config.rail_devices != '\0';
        if (!said.exchange(true))
            log_line(config, topo.rank, given ? 0 : 1,
                     "UCX on network device " + nic + " (" + rail_why +
                         ") failed: " + last_error() + "; UCX chooses the network device instead");
        ts = Runtime::instance().transport(thread_multi, "", &transport);
    } else {
        log_line(config, topo.rank, 10,
                 "network device " + (nic.empty() ? std::string("of UCX's choice") : nic) + ": " +
                     rail_why);
    }
    const std::string why = ts == kSuccess ? "" : last_error();
    bool all_ok = false;
    GPUCOLL_TRY(bootstrap_agree(bs, ts == kSuccess, &all_ok));
    if (!all_ok)
        return ts != kSuccess ? set_error(GPUCOLL_ERR_UNSUPPORTED, "%s", why.c_str())
                              : set_error(GPUCOLL_ERR_UNSUPPORTED,
                                          "the inter-node transport failed to start on another "
                                          "rank; see its output");

    // The communicator id, then every rank's worker address (padded).
    std::unique_ptr<Hierarchy> h(new Hierarchy());
    h->transport_ = transport;
    uint32_t comm_id = 0;
    for (unsigned attempt = 0;; ++attempt) {
        // A retry proposes past the collision, apart from a concurrent
        // creation that collided too (it may retry in step with this one).
        uint32_t proposal = g_next_comm_id.load();
        if (attempt > 0) proposal += retry_offset();
        std::vector<uint32_t> ids;
        GPUCOLL_TRY(bootstrap_allgather(bs, proposal, &ids));
        const uint32_t id = *std::max_element(ids.begin(), ids.end());
        uint32_t cur = g_next_comm_id.load();
        while (cur <= id && !g_next_comm_id.compare_exchange_weak(cur, id + 1)) {
        }
        comm_id = id & 0xffff;
        const bool held = hold_comm_id(comm_id);
        const Status agreed = bootstrap_agree(bs, held, &all_ok);
        if (agreed == kSuccess && all_ok) break;
        if (held) release_comm_id(comm_id);
        GPUCOLL_TRY(agreed);
        if (attempt == 64)
            return set_error(GPUCOLL_ERR_UNSUPPORTED,
                             "no communicator id free in every process after 64 tries (%zu "
                             "communicators between nodes live in this one)",
                             live_comm_ids());
    }
    h->comm_id_ = comm_id;
    h->comm_id_held_ = true;
    const std::vector<uint8_t>& address = transport->address();
    std::vector<uint32_t> lengths;
    GPUCOLL_TRY(bootstrap_allgather(bs, static_cast<uint32_t>(address.size()), &lengths));
    const uint32_t longest = *std::max_element(lengths.begin(), lengths.end());
    std::vector<uint8_t> padded(longest, 0), all(static_cast<size_t>(bs.size) * longest);
    std::copy(address.begin(), address.end(), padded.begin());
    GPUCOLL_TRY(bootstrap_allgather(bs, padded.data(), longest, all.data()));

    h->topo_ = topo;
    h->algorithm_ = static_cast<InterAlgorithm>(config.inter_algorithm);
    h->direct_max_bytes_ = config.inter_direct_max_bytes;
    h->description_ = transport->description();
    Device* device = Runtime::instance().device();
    GroupConfig gc;
    gc.chunk_bytes = config.inter_chunk_bytes;
    gc.bcast = config.inter_bcast;
    gc.progress = config.progress;
    gc.sleep_when_idle = processes_on_machine(topo) > machine_cores();
    gc.wait_warning_s = config.wait_warning_s;
    gc.peer_timeout_s = config.peer_timeout_s;
    gc.uniform_memory = config.uniform_memory != 0;
    gc.log = config.log;
    bool ok = topo.size <= static_cast<int>(kMaxGroupSize);
    auto make_group = [&](int local, std::unique_ptr<Group>* group) {
        std::vector<Endpoint*> eps;
        GroupConfig mine = gc;
        for (int n = 0; n < topo.nodes() && ok; ++n) {
            const int r = topo.members[n][local];
            mine.member_ranks.push_back(r);
            mine.member_hosts.push_back(static_cast<size_t>(n) < topo.hosts.size()
                                            ? topo.hosts[static_cast<size_t>(n)]
                                            : "");
            Endpoint* ep = nullptr;
            if (r != topo.rank)
                ok = transport->connect(all.data() + static_cast<size_t>(r) * longest, lengths[r],
                                        &ep) == kSuccess;
            eps.push_back(ep);
        }
        if (ok) {
            *group = std::make_unique<Group>(transport.get(), device, std::move(eps), topo.node,
                                             comm_id, mine, node_abort);
            ok = (*group)->start() == kSuccess;
        }
    };
    if (topo.equal_ppn()) make_group(topo.local, &h->rail_);
    if (topo.local == 0) make_group(0, &h->leaders_);
    // Every rank has its groups before anyone waits for a hello.
    const std::string setup_failure = ok ? "" : last_error();
    GPUCOLL_TRY(bootstrap_agree(bs, ok, &all_ok));
    if (!all_ok)
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "reaching the other nodes over %s failed%s%s",
                         h->description_.c_str(), ok ? " on another rank" : ": ",
                         setup_failure.c_str());
    // Every member reaches every other before the communicator is used: an
    // unreachable peer turns the inter path off here, not in a call.
    for (Group* g : {h->rail_.get(), h->leaders_.get()}) {
        if (g == nullptr || !ok) continue;
        std::vector<uint32_t> got(static_cast<size_t>(g->size()), comm_id);
        ok =
            g->exchange_host(0, kHelloStep, &comm_id, sizeof comm_id, got.data(), 30.0) == kSuccess;
        for (uint32_t v : got) ok = ok && v == comm_id;  // every member agreed on the id
    }
    const std::string failure = ok ? "" : last_error();
    GPUCOLL_TRY(bootstrap_agree(bs, ok, &all_ok));
    if (!all_ok)
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "connecting the nodes over %s failed%s%s",
                         h->description_.c_str(), failure.empty() ? " on another rank" : ": ",
                         failure.c_str());
    // Device memory straight to UCX, or staged: the same on every rank. The
    // endpoints are wired up now (the exchange above), so their transports
    // are known.
    bool direct = transport->cuda_memory() && std::string(device->name()) == "cuda" &&
                  config.inter_device_memory != 2;
    std::string lanes;
    for (Group* g : {h->rail_.get(), h->leaders_.get()})
        if (g != nullptr && direct && config.inter_device_memory == 0)
            direct = g->device_capable(&lanes);
    GPUCOLL_TRY(bootstrap_agree(bs, direct, &all_ok));
    h->lanes_ = lanes;
    for (Group* g : {h->rail_.get(), h->leaders_.get()})
        if (g != nullptr)
            ok = g->set_direct(all_ok, /*reserve_now=*/ordinal >= 0) == kSuccess && ok;
    GPUCOLL_TRY(bootstrap_agree(bs, ok, &all_ok));
    if (!all_ok) return set_error(GPUCOLL_ERR_UNSUPPORTED, "pinned staging buffers unavailable");
    *out = std::move(h);
    return kSuccess;
}

Status Hierarchy::exchange(uint64_t seq, const Verdict& mine, Verdict* out) {
    Group* g = verdict_group();
    *out = mine;
    if (g == nullptr || g->size() == 1) return kSuccess;
    std::vector<Verdict>& theirs = verdicts_;  // reused call after call
    theirs.resize(static_cast<size_t>(g->size()));
    GPUCOLL_TRY(g->exchange_host(seq, kVerdictStep, &mine, sizeof mine, theirs.data()));
    return combine(*g, mine, theirs, out);
}

Status Hierarchy::start_exchange(uint64_t seq, const Verdict& mine, VerdictExchange* x) {
    x->group = verdict_group();
    *x->mine = mine;
    if (x->group == nullptr || x->group->size() == 1) return kSuccess;
    x->theirs.assign(static_cast<size_t>(x->group->size()), Verdict{});
    return x->group->post_host_exchange(seq, kVerdictStep, x->mine.get(), sizeof(Verdict),
                                        x->theirs.data(), &x->reqs);
}

Status Hierarchy::test_exchange(uint64_t seq, VerdictExchange* x, bool* done, Verdict* out) {
    *done = false;
    if (x->group == nullptr || x->group->size() == 1) {
        *out = *x->mine;
        *done = true;
        return kSuccess;
    }
    GPUCOLL_TRY(x->group->test_requests(seq, &x->reqs, done));
    if (!*done) return kSuccess;
    x->reqs.clear();
    return combine(*x->group, *x->mine, x->theirs, out);
}

VerdictExchange::~VerdictExchange() {
    if (group == nullptr) return;
    // Receives are cancelled (UCX is done with their buffers when that
    // returns); a send is only released, and UCX reads its buffer until it
    // completes. post_host_exchange puts member p's send at 2p + 1.
    // A send cancelled earlier (the exchange failed) may be in flight too.
    // Nothing active: the group is not touched (it may be gone).
    bool active = false;
    for (const Request& r : reqs) active = active || r.active;
    if (active) group->cancel_requests(&reqs);
    bool sending = false;
    for (size_t i = 1; i < reqs.size(); i += 2) sending = sending || reqs[i].abandoned;
    if (sending) (void)mine.release();
}

Status Hierarchy::combine(const Group& g, const Verdict& mine, const std::vector<Verdict>& theirs,
                          Verdict* out) const {
    *out = mine;
    for (int p = 0; p < g.size(); ++p) {
        if (p == g.me()) continue;
        const Verdict& v = theirs[p];
        if (v.code < kAccelerate || v.code > kDecline)
            return set_error(GPUCOLL_ERR_INTERNAL, "a peer sent an invalid verdict %u", v.code);
        if (v.code > out->code) *out = v;
    }
    if (out->code == kAccelerate || out->code == kRebind) {
        for (int p = 0; p < g.size(); ++p)
            if (p != g.me() && !(theirs[p].sig == mine.sig)) {
                *out = theirs[p];
                out->code = kMismatch;
                break;
            }
    }
    return kSuccess;
}

void Hierarchy::abort(uint64_t seq) {
    for (Group* g : {rail_.get(), leaders_.get()})
        if (g != nullptr) g->abort(seq);
}

uint64_t Hierarchy::take_bytes_sent() {
    uint64_t b = 0;
    for (Group* g : {rail_.get(), leaders_.get()})
        if (g != nullptr) b += std::exchange(g->bytes_sent, 0);
    return b;
}

}  // namespace gpucoll::inter

// comm_api.cc - the C interface of communicators (gpucoll_comm_*): one node
// (the node communicator alone), or several (a node communicator per node,
// over a bootstrap of that node's ranks, and the hierarchy between nodes).
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/bootstrap.h"
#include "common/log_line.h"
#include "core/counters.h"
#include "core/lifetime.h"
#include "core/runtime.h"
#include "core/timing.h"
#include "device/device.h"
#include "gpucoll.h"
#include "inter/hierarchy.h"
#include "intra/node_comm.h"
#include "intra/progress_agent.h"

// A nonblocking call: its communicator's queue entry.
struct gpucoll_pending {
    gpucoll::intra::NodeComm* comm = nullptr;
    std::shared_ptr<gpucoll::intra::NodeComm::Pending> pending;
};

struct gpucoll_plan {
    std::shared_ptr<gpucoll::intra::NodeComm::Plan> plan;
};

namespace gpucoll {
namespace {
// Communicators of this process that hold an accelerated path (or are being
// given one): what gpucoll_comm_config_t::max_comms bounds.
std::atomic<int> g_live_comms{0};
struct LiveComm {
    LiveComm() { g_live_comms.fetch_add(1, std::memory_order_relaxed); }
    ~LiveComm() { g_live_comms.fetch_sub(1, std::memory_order_relaxed); }
    LiveComm(const LiveComm&) = delete;
    LiveComm& operator=(const LiveComm&) = delete;
};
}  // namespace
}  // namespace gpucoll

struct gpucoll_comm {
    gpucoll::LiveComm live;
    // Declared first: destroyed after the node communicator that uses it.
    std::unique_ptr<gpucoll::inter::Hierarchy> hierarchy;
    std::unique_ptr<gpucoll::intra::NodeComm> node;
    // Its host calls (gpucoll_comm_host_call, the host gate), counted in the
    // gate: set up with node (attach), destroyed before it.
    std::optional<gpucoll::DelegatedTally> delegated;
    void attach(std::unique_ptr<gpucoll::intra::NodeComm> n) {
        node = std::move(n);
        gpucoll_host_gate_t& gate = node->host_gate();
        gate.last_call = &gpucoll::counters_detail::g_last_call;
        delegated.emplace(gate.delegated);
    }
};

namespace {

using gpucoll::log_line;
using gpucoll::Status;
namespace lifetime = gpucoll::lifetime;

// A root outside the communicator (an erroneous call that reaches us where
// MPI's parameter checks are off, mpi_param_check 0): the call fails here,
// before anything is posted, on every rank that passes it; never a read
// past the communicator's tables.
int check_root(const gpucoll_comm& comm, const gpucoll_call_t& call) {
    if (call.coll != GPUCOLL_COLL_BCAST && call.coll != GPUCOLL_COLL_REDUCE) return GPUCOLL_SUCCESS;
    const int size = comm.node->call_size();
    if (call.root >= 0 && call.root < size) return GPUCOLL_SUCCESS;
    return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG,
                              "%s with root %d on a communicator of %d ranks: the root must be "
                              "0..%d; nothing was moved",
                              gpucoll_coll_name(call.coll), call.root, size, size - 1);
}

// Who a rank is, for the whole communicator: its node, backend and settings.
struct Identity {
    char node[96];
    char backend[8];
    gpucoll::intra::Settings settings;
    int32_t live;       // communicators of this process with an accelerated path
    int32_t max_comms;  // its bound (0: none)
};

// The bootstrap of one node's ranks, on the whole communicator's: every
// rank of the communicator makes the same calls (each node its own
// communicator at the same time), and keeps its node's part.
struct SubBootstrap {
    const gpucoll_bootstrap_t* parent;
    std::vector<int> members;  // ranks of the parent, in order
    std::vector<uint8_t> all;

    static int allgather(void* ctx, const void* send, void* recv, size_t bytes) {
        auto* sb = static_cast<SubBootstrap*>(ctx);
        sb->all.resize(bytes * static_cast<size_t>(sb->parent->size));
        if (sb->parent->allgather(sb->parent->ctx, send, sb->all.data(), bytes) != 0) return -1;
        for (size_t i = 0; i < sb->members.size(); ++i)
            std::memcpy(static_cast<uint8_t*>(recv) + i * bytes,
                        sb->all.data() + static_cast<size_t>(sb->members[i]) * bytes, bytes);
        return 0;
    }
    static int barrier(void* ctx) {
        auto* sb = static_cast<SubBootstrap*>(ctx);
        return sb->parent->barrier != nullptr ? sb->parent->barrier(sb->parent->ctx) : 0;
    }
};

// Several nodes: a node communicator per node, then the hierarchy; *out
// stays null (on every rank) when either cannot be had.
Status create_between_nodes(const gpucoll_bootstrap_t& bs, const gpucoll_comm_config_t& config,
                            const gpucoll::inter::Topology& topo, gpucoll_comm** out) {
    SubBootstrap sub{&bs, topo.members[topo.node], {}};
    const gpucoll_bootstrap_t node_bs{&sub, topo.local, static_cast<int>(sub.members.size()),
                                      SubBootstrap::allgather, SubBootstrap::barrier};
    auto comm = std::make_unique<gpucoll_comm>();
    std::unique_ptr<gpucoll::intra::NodeComm> node;
    Status s = gpucoll::intra::NodeComm::create(node_bs, config, &node);
    if (s != gpucoll::kSuccess) return s;  // the bootstrap failed: everywhere
    if (node != nullptr) comm->attach(std::move(node));
    bool all_ok = false;
    GPUCOLL_TRY(gpucoll::bootstrap_agree(bs, comm->node != nullptr, &all_ok));
    if (!all_ok) {
        log_line(config, bs.rank, 1, "accelerated path off: a node could not set up IPC");
        return gpucoll::kSuccess;
    }
    // The pinned chunks are allocated on the node communicator's GPU.
    gpucoll::DeviceScope on_gpu;
    (void)on_gpu.enter(gpucoll::Runtime::instance().device(), comm->node->ordinal());
    s = gpucoll::inter::Hierarchy::create(bs, topo, config, comm->node->ordinal(),
                                          &comm->node->segment().header().abort, &comm->hierarchy);
    if (s == GPUCOLL_ERR_UNSUPPORTED) {
        // The user named the NICs: said once per process without verbose
        // output too (a wrong name turns the path between nodes off).
        static std::atomic<bool> said{false};
        const bool given = config.rail_devices != nullptr && *config.rail_devices != '\0';
        log_line(config, bs.rank, given && !said.exchange(true) ? 0 : 1,
                 std::string("accelerated path off between nodes (staged): ") +
                     gpucoll::last_error() +
                     (given ? " (coll_gpucoll_rail_devices names the NICs)" : ""));
        return gpucoll::kSuccess;
    }
    GPUCOLL_TRY(s);
    comm->node->attach(comm->hierarchy.get());
    const gpucoll::inter::Group* rail = comm->hierarchy->rail();
    log_line(config, bs.rank, 1,
             std::string("between nodes: ") + std::to_string(topo.nodes()) + " nodes, " +
                 std::to_string(topo.min_ppn) +
                 (topo.equal_ppn() ? "" : "-" + std::to_string(topo.max_ppn)) +
                 " ranks per node, over " + comm->hierarchy->description() +
                 (rail == nullptr ? ", leaders only (uneven nodes)" : "") +
                 (comm->hierarchy->verdict_group() == nullptr ? ""
                  : comm->hierarchy->verdict_group()->direct()
                      ? ", device memory straight to UCX"
                      : ", device memory staged through pinned host memory in chunks") +
                 (comm->hierarchy->lanes().empty() ? "" : " (" + comm->hierarchy->lanes() + ")"));
    *out = comm.release();
    return gpucoll::kSuccess;
}

}  // namespace

extern "C" {

void gpucoll_comm_config_init(gpucoll_comm_config_t* config) {
    if (config == nullptr) return;
    *config = gpucoll_comm_config_t{};
    for (auto& a : config->algorithm) a = GPUCOLL_ALGO_AUTO;
    config->uniform_memory = 0;
    config->one_shot_max_bytes = 0;    // the backend's default (NodeComm::create)
    config->one_kernel_max_bytes = 0;  // forced only
    config->chain_min_bytes = size_t{8} << 20;
    config->chunk_bytes = size_t{1} << 20;
    config->ipc_cache_entries = 128;
    config->ipc_cache_bytes = 0;
    config->device_flags = GPUCOLL_FLAGS_AUTO;
    config->host_pipeline = -1;
    config->inter_algorithm = 0;
    config->inter_chunk_bytes = size_t{1} << 20;
    config->inter_direct_max_bytes = size_t{16} << 10;
    config->inter_device_memory = 0;
    config->thread_multiple = 0;
    config->progress_thread = -1;
    config->rails = 1;
    config->rail_devices = nullptr;
    config->inter_bcast = 0;
    config->wait_warning_s = 60;
    config->max_comms = 0;  // no bound
    config->peer_timeout_s = 120;
    config->selection_file = nullptr;  // the backend's built-in table
    config->verbose = 0;
    config->log = nullptr;
}

int gpucoll_comm_create(const gpucoll_bootstrap_t* bootstrap, const gpucoll_comm_config_t* config,
                        gpucoll_comm_t** out) {
    if (bootstrap == nullptr || out == nullptr || bootstrap->allgather == nullptr ||
        bootstrap->size < 1 || bootstrap->rank < 0 || bootstrap->rank >= bootstrap->size)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_comm_create: bad bootstrap");
    *out = nullptr;
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_comm_create");
    gpucoll_comm_config_t defaults;
    gpucoll_comm_config_init(&defaults);
    const gpucoll_comm_config_t& cfg = config ? *config : defaults;
    const gpucoll_bootstrap_t& bs = *bootstrap;

    // Which ranks share a node, and whether all can take the same decisions.
    gpucoll::Device* device = gpucoll::Runtime::instance().device();
    Identity mine{};
    std::snprintf(mine.node, sizeof mine.node, "%s", gpucoll::intra::node_identity().c_str());
    std::snprintf(mine.backend, sizeof mine.backend, "%s", device ? device->name() : "none");
    mine.settings = gpucoll::intra::settings_of(cfg);
    mine.live = gpucoll::g_live_comms.load(std::memory_order_relaxed);
    mine.max_comms = cfg.max_comms;
    std::vector<Identity> all;
    GPUCOLL_TRY(gpucoll::bootstrap_allgather(bs, mine, &all));
    std::vector<std::string> nodes;
    for (size_t r = 0; r < all.size(); ++r) {
        const Identity& id = all[r];
        if (id.max_comms > 0 && id.live >= id.max_comms) {
            // Said once per process (a performance cliff), else at verbose 1.
            static std::atomic<bool> said{false};
            log_line(cfg, bs.rank, said.exchange(true) ? 1 : 0,
                     "accelerated path off for this communicator: rank " + std::to_string(r) +
                         " already has " + std::to_string(id.live) +
                         " communicators with one (coll_gpucoll_max_comms " +
                         std::to_string(id.max_comms) +
                         "); its device buffers are staged. Free the communicators you no "
                         "longer use, or raise the bound (each costs device memory and memory "
                         "mappings)");
            return GPUCOLL_SUCCESS;
        }
    }
    for (const Identity& id : all) {
        if (std::strcmp(id.backend, mine.backend) != 0 || std::strcmp(mine.backend, "none") == 0) {
            log_line(cfg, bs.rank, 1,
                     "accelerated path off: device backends differ or none is active");
            return GPUCOLL_SUCCESS;
        }
        if (!(id.settings == mine.settings)) {
            log_line(cfg, bs.rank, 0 /* always */,
                     "accelerated path off: the coll_gpucoll_* parameters differ between the "
                     "ranks of this communicator; set them the same everywhere");
            return GPUCOLL_SUCCESS;
        }
        nodes.emplace_back(id.node);
    }
    const auto topo = gpucoll::inter::Topology::from_identities(nodes, bs.rank);
    if (topo.nodes() > 1) return create_between_nodes(bs, cfg, topo, out);

    std::unique_ptr<gpucoll::intra::NodeComm> node;
    int s = gpucoll::intra::NodeComm::create(bs, cfg, &node);
    if (s != GPUCOLL_SUCCESS || !node) return s;
    auto comm = std::make_unique<gpucoll_comm>();
    comm->attach(std::move(node));
    *out = comm.release();  // owned by the caller until gpucoll_comm_destroy
    return GPUCOLL_SUCCESS;
}

// In a forked child, communicators, plans and requests are the parent's:
// left as they are (their teardown would wait for the parent's peers, post
// into the node's segment and join threads the child does not have).
void gpucoll_comm_destroy(gpucoll_comm_t* comm) {
    if (comm != nullptr && lifetime::forked_child()) {
        (void)lifetime::refuse("gpucoll_comm_destroy");
        return;
    }
    std::unique_ptr<gpucoll_comm> owned(comm);
}

namespace {

[[gnu::noinline]] int decline_locked(gpucoll_comm_t& comm) {
    std::lock_guard lock(comm.node->lock());
    return comm.node->decline();
}

// Inline into the host-buffer path; the long way out of line.
inline int decline(gpucoll_comm_t& comm) {
    int status = GPUCOLL_SUCCESS;
    if (comm.node->decline_unlocked(&status)) return status;  // nothing queued
    return decline_locked(comm);
}

// Device memory? Host memory is mostly told inline (surely_host).
inline bool on_device(gpucoll::Device& d, const void* p) {
    return p != nullptr && !d.surely_host(p) && d.memory_type(p) == GPUCOLL_MEM_DEVICE;
}

}  // namespace

int gpucoll_comm_decline(gpucoll_comm_t* comm) {
    if (comm == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_comm_decline: NULL argument");
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_comm_decline");
    return decline(*comm);
}

int gpucoll_comm_settle(gpucoll_comm_t* comm) {
    if (comm == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_comm_settle: NULL argument");
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_comm_settle");
    std::lock_guard lock(comm->node->lock());
    return comm->node->settle();
}

int gpucoll_comm_host_call(gpucoll_comm_t* comm, const void* a, const void* b, gpucoll_coll_t coll,
                           int* device) {
    // Every host-buffer collective comes through here: no lock, no
    // allocation, one call from the component, each buffer classified once.
    if (lifetime::forked_child()) [[unlikely]]
        return lifetime::refuse("gpucoll_comm_host_call");
    int found = 0;
    if (gpucoll::Device* d = gpucoll::Runtime::instance().device(); d != nullptr) {
        const gpucoll::timing::Scope timed(coll, gpucoll::timing::kClassify);
        if (on_device(*d, a)) found |= 1;
        if (on_device(*d, b)) found |= 2;
    }
    if (device != nullptr) *device = found;
    if (found != 0) return GPUCOLL_SUCCESS;
    if (comm == nullptr) {
        gpucoll::counters_record_delegated(coll);
        return GPUCOLL_DECLINED;
    }
    const int status = decline(*comm);
    if (status == GPUCOLL_DECLINED) gpucoll::counters_record_delegated(coll, &*comm->delegated);
    return status;
}

gpucoll_host_gate_t* gpucoll_comm_host_gate(gpucoll_comm_t* comm, int version, size_t gate_bytes) {
#if defined(GPUCOLL_THREAD_SANITIZER)
    // The segment's flags carry annotations here (SharedSegment::store_release)
    // that inline code in the caller cannot make.
    (void)comm;
    (void)version;
    (void)gate_bytes;
    return nullptr;
#else
    if (version != GPUCOLL_HOST_GATE_VERSION || gate_bytes != sizeof(gpucoll_host_gate_t))
        return nullptr;  // built against another gpucoll.h: the core's way
    if (comm == nullptr || comm->hierarchy != nullptr) return nullptr;  // declines are messages
    if (lifetime::forked_child()) return nullptr;                       // the parent's segment
    gpucoll_host_gate_t& gate = comm->node->host_gate();
    return gate.span != nullptr ? &gate : nullptr;  // no span: classifying asks the backend
#endif
}

int gpucoll_host_gate_failed(void) { return gpucoll::intra::NodeComm::failed_by_peer(); }

int gpucoll_comm_start(gpucoll_comm_t* comm, const gpucoll_call_t* call, gpucoll_form_t form,
                       gpucoll_pending_t** op) {
    if (comm == nullptr || call == nullptr || op == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_comm_start: NULL argument");
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_comm_start");
    if (const int s = check_root(*comm, *call)) return s;
    if (!gpucoll_comm_nonblocking(comm))
        return gpucoll::set_error(GPUCOLL_ERR_UNSUPPORTED,
                                  "nonblocking calls between nodes without the progress thread "
                                  "are staged");
    auto handle = std::make_unique<gpucoll_pending>();
    handle->comm = comm->node.get();
    std::lock_guard lock(comm->node->lock());
    handle->pending = comm->node->start(*call, form);
    *op = handle.release();
    return GPUCOLL_SUCCESS;
}

int gpucoll_plan_create(gpucoll_comm_t* comm, const gpucoll_call_t* call, gpucoll_plan_t** plan) {
    if (comm == nullptr || call == nullptr || plan == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_plan_create: NULL argument");
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_plan_create");
    if (const int s = check_root(*comm, *call)) return s;
    if (comm->node->hierarchy() != nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_UNSUPPORTED,
                                  "persistent calls between nodes are not planned: each start "
                                  "sets up its call");
    auto handle = std::make_unique<gpucoll_plan>();
    std::lock_guard lock(comm->node->lock());
    handle->plan = comm->node->make_plan(*call);
    *plan = handle.release();
    return GPUCOLL_SUCCESS;
}

int gpucoll_plan_start(gpucoll_comm_t* comm, gpucoll_plan_t* plan, gpucoll_pending_t** op) {
    if (comm == nullptr || plan == nullptr || op == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_plan_start: NULL argument");
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_plan_start");
    if (plan->plan->comm_id != comm->node->id())
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG,
                                  "gpucoll_plan_start: the plan was made for another communicator");
    auto handle = std::make_unique<gpucoll_pending>();
    handle->comm = comm->node.get();
    std::lock_guard lock(comm->node->lock());
    handle->pending = comm->node->start(plan->plan);
    *op = handle.release();
    return GPUCOLL_SUCCESS;
}

int gpucoll_plan_matches(const gpucoll_comm_t* comm, const gpucoll_plan_t* plan) {
    return comm != nullptr && plan != nullptr && plan->plan->comm_id == comm->node->id() ? 1 : 0;
}

void gpucoll_plan_free(gpucoll_plan_t* plan) {
    if (lifetime::forked_child()) return;  // see gpucoll_comm_destroy
    std::unique_ptr<gpucoll_plan> owned(plan);
}

int gpucoll_comm_start_decline(gpucoll_comm_t* comm) {
    if (comm == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG,
                                  "gpucoll_comm_start_decline: NULL argument");
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_comm_start_decline");
    if (!gpucoll_comm_nonblocking(comm))
        return gpucoll::set_error(GPUCOLL_ERR_UNSUPPORTED,
                                  "nonblocking calls between nodes without the progress thread "
                                  "are staged");
    std::lock_guard lock(comm->node->lock());
    comm->node->start_decline();
    return GPUCOLL_SUCCESS;
}

int gpucoll_pending_test(gpucoll_pending_t* op, int* done) {
    if (op == nullptr || done == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_pending_test: NULL argument");
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_pending_test");
    auto& pending = *op->pending;
    if (!pending.finished.load(std::memory_order_acquire)) {
        gpucoll::intra::ProgressAgent::instance().note_poll();
        // Fails while the agent (or another thread) advances the queue.
        std::unique_lock lock(op->comm->lock(), std::try_to_lock);
        if (lock.owns_lock()) op->comm->progress();
    }
    *done = pending.finished.load(std::memory_order_acquire) ? 1 : 0;
    if (*done == 0) return GPUCOLL_SUCCESS;
    const int status = op->pending->status;
    if (status != GPUCOLL_SUCCESS && status != GPUCOLL_DECLINED)
        return gpucoll::set_error(static_cast<gpucoll::Status>(status), "%s",
                                  op->pending->error.c_str());
    return status;
}

int gpucoll_pending_done(const gpucoll_pending_t* op) {
    return op != nullptr && op->pending->finished.load(std::memory_order_acquire) ? 1 : 0;
}

void gpucoll_pending_free(gpucoll_pending_t* op) {
    if (lifetime::forked_child()) return;  // see gpucoll_comm_destroy
    std::unique_ptr<gpucoll_pending> owned(op);
}

int gpucoll_comm_single_node(const gpucoll_comm_t* comm) {
    return comm != nullptr && comm->node->hierarchy() == nullptr ? 1 : 0;
}

int gpucoll_comm_nonblocking(const gpucoll_comm_t* comm) {
    // Between nodes a declining rank's verdict goes out from the queue: a
    // thread must advance it while the rank runs Open MPI's call.
    return comm != nullptr &&
                   (comm->node->hierarchy() == nullptr || comm->node->config().progress_thread != 0)
               ? 1
               : 0;
}

int gpucoll_comm_progress(gpucoll_comm_t* comm) {
    if (comm == nullptr) return 0;
    if (lifetime::forked_child()) {  // nothing this process can advance
        (void)lifetime::refuse("gpucoll_comm_progress");
        return 1;
    }
    gpucoll::intra::ProgressAgent::instance().note_poll();
    std::unique_lock lock(comm->node->lock(), std::try_to_lock);
    return lock.owns_lock() && comm->node->progress() ? 1 : 0;
}

int gpucoll_comm_run(gpucoll_comm_t* comm, const gpucoll_call_t* call) {
    if (comm == nullptr || call == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_comm_run: NULL argument");
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_comm_run");
    if (const int s = check_root(*comm, *call)) return s;
    std::lock_guard lock(comm->node->lock());
    return comm->node->run(*call);
}

}  // extern "C"

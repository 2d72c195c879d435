#include "intra/node_comm.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "algo/hierarchical.h"
#include "common/bootstrap.h"
#include "common/machine.h"
#include "core/counters.h"
#include "core/lifetime.h"
#include "core/runtime.h"
#include "core/timing.h"
#include "device/reduce_ops.h"
#include "inter/hierarchy.h"
#include "intra/algorithms.h"
#include "intra/node_layout.h"
#include "intra/one_shot_slot.h"
#include "intra/progress_agent.h"
#include "topo/model_table.h"
#include "topo/report.h"

namespace gpucoll::intra {

// ---------------------------------------------------------------- DeviceBuffer

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_), ptr_(other.ptr_), size_(other.size_) {
    other.ptr_ = nullptr;
    other.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        reset();
        device_ = other.device_;
        ptr_ = other.ptr_;
        size_ = other.size_;
        other.ptr_ = nullptr;
        other.size_ = 0;
    }
    return *this;
}

Status DeviceBuffer::allocate(Device* device, size_t bytes) {
    reset();
    void* p = nullptr;
    GPUCOLL_TRY(device->alloc(&p, bytes));
    device_ = device;
    ptr_ = p;
    size_ = bytes;
    return kSuccess;
}

void DeviceBuffer::reset() {
    if (ptr_ != nullptr) device_->free(ptr_);
    ptr_ = nullptr;
    size_ = 0;
}

// ---------------------------------------------------------------- setup

namespace {

// Who a rank is, exchanged once per communicator. (gpucoll_comm_create
// checked that these ranks share a node, a backend and their settings.)
struct Hello {
    int32_t pid;
    int32_t gpu_known;              // 1: gpu below is this rank's current device
    int32_t flags_without_compute;  // its stream flags occupy no compute units
    int32_t kernels_concurrent;     // kernels of processes sharing its GPU run side by side
    GpuIdentity gpu;
    LayoutVote layout;
};

}  // namespace

Settings settings_of(const gpucoll_comm_config_t& c) {
    Settings s{};
    for (int i = 0; i < GPUCOLL_COLL_COUNT; ++i) s.algorithm[i] = c.algorithm[i];
    s.uniform_memory = c.uniform_memory;
    s.device_flags = c.device_flags;
    s.host_pipeline = c.host_pipeline;
    s.inter_algorithm = c.inter_algorithm;
    s.inter_device_memory = c.inter_device_memory;
    s.inter_bcast = c.inter_bcast;
    s.progress_off = c.progress_thread == 0 ? 1 : 0;
    s.thread_multiple = c.thread_multiple;
    s.one_shot_max_bytes = c.one_shot_max_bytes;
    s.chain_min_bytes = c.chain_min_bytes;
    s.chunk_bytes = c.chunk_bytes;
    s.inter_chunk_bytes = c.inter_chunk_bytes;
    s.inter_direct_max_bytes = c.inter_direct_max_bytes;
    s.one_kernel_max_bytes = c.one_kernel_max_bytes;
    return s;
}

std::string node_identity() {
    const char* forced = std::getenv("GPUCOLL_HOSTID");
    if (forced != nullptr && *forced != '\0') return std::string("hostid:") + forced;
    std::string id;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::getline(boot, id);
    char host[64] = {};
    gethostname(host, sizeof host - 1);
    return id + "/" + host;
}

namespace {

// Which flags a communicator uses, from the configured mode and which ranks
// share a GPU; the same on every rank (computed from the same hellos).
struct FlagsChoice {
    bool device_flags = false;
    bool gpu_shared = false;
    bool fell_back = false;  // device flags asked for, host flags used
};

FlagsChoice choose_flags(int mode, const std::vector<Hello>& all) {
    FlagsChoice c;
    bool all_known = true, all_without_compute = true;
    for (size_t i = 0; i < all.size(); ++i) {
        all_known = all_known && all[i].gpu_known != 0;
        all_without_compute = all_without_compute && all[i].flags_without_compute != 0;
        for (size_t j = 0; j < i; ++j)
            if (all[i].gpu_known != 0 && all[j].gpu_known != 0 && all[i].gpu == all[j].gpu)
                c.gpu_shared = true;
    }
    if (!all_known) c.gpu_shared = true;  // a rank whose GPU is unknown may share one
    switch (mode) {
        case GPUCOLL_FLAGS_HOST:
            break;
        case GPUCOLL_FLAGS_DEVICE:
            c.device_flags = !c.gpu_shared || all_without_compute;
            c.fell_back = !c.device_flags;
            break;
        default:  // GPUCOLL_FLAGS_AUTO
            c.device_flags = !c.gpu_shared;
            break;
    }
    return c;
}

}  // namespace

namespace {
// The GPU the next communicator this thread creates is set up on, after a
// call of this thread answered GPUCOLL_REBIND for buffers there (-1: none).
thread_local int t_rebind_device = -1;
}  // namespace

Status NodeComm::create(const gpucoll_bootstrap_t& bs, const gpucoll_comm_config_t& config,
                        std::unique_ptr<NodeComm>* out) {
    out->reset();
    std::unique_ptr<NodeComm> comm(new NodeComm());
    static std::atomic<uint64_t> next_id{1};
    comm->id_ = next_id.fetch_add(1);
    comm->rank_ = bs.rank;
    comm->size_ = bs.size;
    comm->config_ = config;
    comm->device_ = Runtime::instance().device();
    comm->cache_ = &Runtime::instance().ipc_cache();

    if (comm->device_ == nullptr) return kSuccess;  // backend "none" everywhere (checked)
    Hello hello{};
    hello.pid = getpid();
    // The current device: the application chose it before its first
    // collective (gpucoll_select_local_device, cudaSetDevice). A process
    // that has not touched a GPU yet, with several to choose from, has not
    // chosen (the usual way: MPI_Comm_split_type, whose host collective
    // comes here, then cudaSetDevice by node-local rank): the communicator
    // stays on no GPU, creating nothing on any (on GPU 0, a context of
    // every rank of the node), and its first blocking call on device
    // buffers sets it up again where they are (GPUCOLL_REBIND). With one
    // GPU there is nothing to choose: it is the one.
    // A thread without a context in a process that already uses exactly
    // one GPU (an application's worker thread calling MPI, the main thread
    // having chosen) is on that GPU. A communicator set up again after a
    // call on buffers of another GPU is set up there.
    Device* const dev = comm->device_;
    int ordinal = std::exchange(t_rebind_device, -1);
    if (ordinal >= dev->device_count()) ordinal = -1;
    if (ordinal < 0 && (dev->thread_has_context() || dev->device_count() == 1)) {
        if (dev->current_device(&ordinal) != kSuccess) ordinal = -1;
    } else if (ordinal < 0) {
        int only = -1, used = 0;
        for (int d = 0; d < dev->device_count(); ++d)
            if (dev->holds_context(d)) only = d, ++used;
        if (used == 1) ordinal = only;
    }
    comm->ordinal_ = ordinal;
    // The setup below allocates there, whatever this thread's current GPU.
    DeviceScope on_device;
    if (on_device.enter(dev, ordinal) != kSuccess) {
        comm->log(1, "cannot make GPU %d current: %s; set up on none", ordinal, last_error());
        comm->ordinal_ = ordinal = -1;
    }
    if (ordinal >= 0 && comm->device_->gpu_identity(ordinal, &hello.gpu) == kSuccess) {
        hello.gpu_known = 1;
        hello.flags_without_compute = comm->device_->flags_without_compute(ordinal) ? 1 : 0;
        hello.kernels_concurrent = comm->device_->kernels_concurrent(ordinal) ? 1 : 0;
    }
    // The topology's vote: this rank's GPU in the node's machine.
    std::string bus_id, topo_error;
    const topo::Machine* machine = nullptr;
    if (hello.gpu_known != 0) (void)comm->device_->pci_bus_id(ordinal, &bus_id);
    hello.layout = vote_layout(config, bs.rank, bs.size, bus_id, &machine, &topo_error);
    // The cost model's vote: the parameters this rank loaded.
    const topo::ModelParams* model = nullptr;
    if (config.cost_model != nullptr && *config.cost_model != '\0') {
        std::string model_error;
        model = topo::load_model(config.cost_model, comm->device_->name(), &model_error);
        static std::atomic<bool> model_error_said{false};  // once per process
        if (model == nullptr && !model_error_said.exchange(true))
            comm->log(0, "coll_gpucoll_cost_model: %s; size thresholds instead",
                      model_error.c_str());
        if (model != nullptr) hello.layout.model = topo::model_fingerprint(*model);
    }
    // The measured selection table's vote: the rules this rank read (the
    // built-in table only where no cost model was asked for).
    bool builtin_table = false, first_load = false;
    std::string table_error;
    std::vector<std::string> table_warnings;
    const SelectionTable* table =
        load_selection_table(config.selection_file, comm->device_->name(), &table_error,
                             &table_warnings, &builtin_table, &first_load);
    for (const std::string& w : first_load ? table_warnings : std::vector<std::string>{})
        comm->log(0, "coll_gpucoll_selection_file: %s", w.c_str());
    if (first_load && !table_error.empty())
        comm->log(0, "coll_gpucoll_selection_file: %s; no table used", table_error.c_str());
    if (builtin_table && model != nullptr) table = nullptr;  // the model asked for wins
    if (table != nullptr) hello.layout.selection = table->fingerprint();
    static std::atomic<bool> topo_error_said{false};  // once per process
    if (!topo_error.empty() && !topo_error_said.exchange(true))
        comm->log(0, "topology not used: %s (coll_gpucoll_topology_file, coll_gpucoll_nvlink_file)",
                  topo_error.c_str());
    std::vector<Hello> all;
    GPUCOLL_TRY(bootstrap_allgather(bs, hello, &all));
    for (const Hello& h : all) comm->pids_.push_back(h.pid);
    std::vector<LayoutVote> votes;
    bool same_model = model != nullptr, same_selection = true;
    for (const Hello& h : all) {
        votes.push_back(h.layout);
        same_model = same_model && h.layout.model == hello.layout.model;
        same_selection = same_selection && h.layout.selection == hello.layout.selection;
    }
    comm->use_layout(agree_layout(machine, votes), machine);
    if (model != nullptr && !same_model)
        comm->log(0,
                  "coll_gpucoll_cost_model: the ranks of this node loaded different "
                  "parameters; size thresholds instead");
    comm->call_size_ = comm->size_;
    for (int p = 0; p < comm->size_; ++p) comm->global_of_.push_back(p);
    const FlagsChoice flags = choose_flags(config.device_flags, all);
    comm->device_flags_ = flags.device_flags;
    comm->gpu_shared_ = flags.gpu_shared;
    comm->pipelined_ = flags.device_flags || config.host_pipeline == 1 ||
                       (config.host_pipeline < 0 && comm->device_->prefers_async_work());
    // The one-kernel path spins on its peers' flags inside a kernel: where
    // ranks share a GPU, only if their kernels run side by side.
    bool all_concurrent = true;
    for (const Hello& h : all) all_concurrent = all_concurrent && h.kernels_concurrent != 0;
    // Every rank read the same table, or none uses one (a rank that could
    // not read its file votes 0): every rank decides each call alike.
    if (table != nullptr && same_selection)
        comm->measured_ =
            table->rules(comm->size_, gpu_sharing_of(flags.gpu_shared, all_concurrent));
    else if (!same_selection)
        comm->log(0,
                  "coll_gpucoll_selection_file: the ranks of this node read different selection "
                  "tables (or some could not read theirs); none is used, the cost model and the "
                  "size thresholds choose");
    comm->one_kernel_wanted_ =
        (config.one_kernel_max_bytes > 0 ||
         config.algorithm[GPUCOLL_COLL_ALLREDUCE] == GPUCOLL_ALGO_ONE_KERNEL ||
         comm->measured_.names(GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_ONE_KERNEL)) &&
        comm->size_ >= 2 && comm->size_ <= OneKernelAllreduce::kMaxRanks &&
        (!flags.gpu_shared || all_concurrent);
    if (flags.fell_back && ordinal >= 0)
        comm->log(1,
                  "coll_gpucoll_flags device: ranks share a GPU without stream memory operations "
                  "(a waiting kernel would starve the others): host flags instead");
    comm->peer_seen_.assign(all.size(), 0);
    comm->sources_.assign(all.size(), nullptr);
    comm->inputs_.assign(all.size(), nullptr);

    comm->config_.one_shot_max_bytes =
        one_shot_max_bytes(comm->device_->name(), comm->config_.one_shot_max_bytes);
    Status s = comm->setup(bs, comm->config_);
    if (s == GPUCOLL_DECLINED) return kSuccess;  // setup failed somewhere: logged
    GPUCOLL_TRY(s);
    if (same_model) {  // after setup: one-shot's limit is the scratch slot
        comm->model_table_.build(*model, comm->size_, comm->scratch_slot_bytes_);
        comm->log(1, "cost model %s: %s", model->name.c_str(),
                  comm->model_table_.summary().c_str());
    }
    if (!comm->measured_.empty()) {
        const char* sharing = gpu_sharing_name(gpu_sharing_of(comm->gpu_shared_, all_concurrent));
        for (int c = 0; c < GPUCOLL_COLL_REDUCE_LOCAL; ++c) {
            const std::string rules = comm->measured_.summary(static_cast<gpucoll_coll_t>(c));
            if (!rules.empty())
                comm->log(1, "selection table %s (%d ranks, %s): %s: %s", table->origin().c_str(),
                          comm->size_, sharing, gpucoll_coll_name(static_cast<gpucoll_coll_t>(c)),
                          rules.c_str());
        }
    }
    const ProgressAgent::Mode mode = comm->agent_mode_ = comm->choose_agent_mode();
    comm->spin_pauses_ = comm->spin_pauses_for();
    if (comm->ordinal_ < 0)
        comm->log(1,
                  "accelerated path waiting: %d ranks on one node, backend %s, no GPU chosen yet "
                  "(set up again by the first blocking call on device buffers)",
                  comm->size_, comm->device_->name());
    else
        comm->log(1,
                  "accelerated path on: %d ranks on one node, backend %s, %s flags (%s), "
                  "nonblocking calls: progress threads %s",
                  comm->size_, comm->device_->name(), comm->device_flags_ ? "device" : "host",
                  comm->gpu_shared_ ? "ranks share a GPU" : "one GPU per rank",
                  mode == ProgressAgent::Mode::Eager  ? "on"
                  : mode == ProgressAgent::Mode::Lazy ? "lazy"
                                                      : "off");
    comm->init_gate();
    comm->ready_ = true;  // on every rank: setup agreed
    *out = std::move(comm);
    return kSuccess;
}

void NodeComm::init_gate() {
    static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                  std::atomic<uint64_t>::is_always_lock_free);
    gate_.span = device_->device_span();
    RankSlot& mine = segment_.slot(rank_);
    gate_.progress = reinterpret_cast<uint64_t*>(&mine.progress);
    gate_.abort = reinterpret_cast<const uint64_t*>(&segment_.header().abort);
    lifetime::register_gate(&gate_);  // closed in a forked child
}

void NodeComm::use_layout(const topo::Layout& layout, const topo::Machine* machine) {
    ring_ = layout.ring;
    ring_pos_.assign(ring_.size(), 0);
    for (size_t i = 0; i < ring_.size(); ++i)
        ring_pos_[static_cast<size_t>(ring_[i])] = static_cast<int>(i);
    ring_family_ = layout.family == topo::Family::RING;
    if (machine == nullptr) return;
    std::string order;
    for (int r : ring_) order += " " + std::to_string(r);
    log(1, "topology: %s algorithms (%s); ring order:%s", ring_family_ ? "ring" : "direct",
        layout.why.c_str(), order.c_str());
    // The node's summary once per process that is the first of its node, at
    // the first communicator that looks at the topology.
    static std::atomic<bool> summarized{false};
    if (rank_ != 0 || config_.verbose < 1 || summarized.exchange(true)) return;
    topo::ReportInput in;
    in.machine = machine;
    std::string text = topo::format_text(in);
    for (size_t at = 0; at < text.size();) {
        const size_t end = text.find('\n', at);
        const std::string line = text.substr(at, end == std::string::npos ? end : end - at);
        log(1, "topology: %s", line.c_str());
        if (end == std::string::npos) break;
        at = end + 1;
    }
}

Status NodeComm::setup(const gpucoll_bootstrap_t& bs, const gpucoll_comm_config_t& config) {
    cache_->reserve_capacity(std::max<size_t>(config.ipc_cache_entries, 4 * size_t(size_)));
    cache_->reserve_bytes(config.ipc_cache_bytes != 0 ? config.ipc_cache_bytes
                                                      : device_->ipc_cache_default_bytes());
    // The same bootstrap calls on every rank whatever happens here: a node
    // communicator of a communicator that spans nodes runs its bootstrap
    // over the whole communicator, and every node must make the same calls.
    Status s = setup_segment(bs);
    if (s != kSuccess && s != GPUCOLL_DECLINED) return s;
    Status t = setup_scratch(bs, s == kSuccess);
    return s == kSuccess ? t : s;
}

Status NodeComm::setup_segment(const gpucoll_bootstrap_t& bs) {
    struct Where {
        int32_t pid, fd, ok;
    } where{getpid(), -1, 0};
    if (rank_ == 0) {
        where.ok = segment_.create(size_) == kSuccess;
        where.fd = segment_.fd();
    }
    std::vector<Where> all;
    GPUCOLL_TRY(bootstrap_allgather(bs, where, &all));
    bool ok = all[0].ok != 0;
    if (ok && rank_ != 0) ok = segment_.attach(all[0].pid, all[0].fd, size_) == kSuccess;
    if (!ok) log(1, "node segment unavailable: %s", last_error());
    bool all_ok = false;
    GPUCOLL_TRY(bootstrap_agree(bs, ok, &all_ok));
    segment_.close_fd();  // everyone has it mapped (or gave up): nothing stays behind
    return all_ok ? kSuccess : GPUCOLL_DECLINED;
}

Status NodeComm::setup_scratch(const gpucoll_bootstrap_t& bs, bool segment_ok) {
    // Two one-shot slots per rank.
    scratch_slot_bytes_ = one_shot_slot_bytes(config_.one_shot_max_bytes);
    struct Exported {
        BufferDesc desc;
        int32_t ok;
        int32_t none;  // on no GPU yet: no scratch (every call of ours declines or rebinds)
    } mine{};
    const uint64_t zero_flags[kFlagBytes / sizeof(uint64_t)] = {};
    mine.none = ordinal_ < 0;
    mine.ok =
        segment_ok &&
        (ordinal_ < 0 ||
         (scratch_.allocate(device_, kFlagBytes + 2 * scratch_slot_bytes_) == kSuccess &&
          device_->memcpy(scratch_.data(), zero_flags, kFlagBytes, nullptr) == kSuccess &&
          cache_->describe(device_, scratch_.data(), &mine.desc) == kSuccess &&
          ((!pipelined_ && !one_kernel_wanted_) || device_->create_stream(&stream_) == kSuccess)));
    one_kernel_ok_ = one_kernel_wanted_ && stream_ != nullptr;
    std::vector<Exported> all;
    GPUCOLL_TRY(bootstrap_allgather(bs, mine, &all));
    bool ok = true;
    peer_scratch_.assign(static_cast<size_t>(size_), nullptr);
    for (int p = 0; p < size_ && ok; ++p) {
        const Exported& e = all[static_cast<size_t>(p)];
        if (e.ok == 0) {
            ok = false;
        } else if (e.none != 0 || ordinal_ < 0) {
            // A rank on no GPU: no algorithm runs until every rank is set up
            // on one again (it declines or rebinds every call), so nobody
            // reads its scratch, nor it anyone's.
        } else if (pids_[p] == getpid()) {
            peer_scratch_[p] = reinterpret_cast<char*>(e.desc.base) + e.desc.offset;
        } else {
            std::unique_ptr<IpcMapping> m;
            ok = cache_->import(device_, pids_[p], e.desc, &m) == kSuccess;
            if (ok) {
                peer_scratch_[p] = static_cast<char*>(m->address()) + e.desc.offset;
                scratch_mappings_.push_back(std::move(m));
            }
        }
    }
    if (!ok) log(1, "scratch exchange failed: %s", last_error());
    bool all_ok = false;
    GPUCOLL_TRY(bootstrap_agree(bs, ok, &all_ok));
    return all_ok ? kSuccess : GPUCOLL_DECLINED;
}

NodeComm::~NodeComm() {
    lifetime::unregister_gate(&gate_);
    ProgressAgent::instance().forget(this);  // first: the agent may be advancing our queue
    std::lock_guard lock(lock_);
    DeviceScope on_device;  // calls still queued end on our GPU
    (void)on_device.enter(device_, ordinal_);
    teardown();
}

// Nobody may still read our buffers when we free them, and a buffer must not
// be freed while a peer still has it mapped (CUDA leaves that undefined).
void NodeComm::teardown() {
    // Only a communicator whose setup succeeded everywhere does the handshake:
    // after a failed setup some ranks may not even have the segment.
    if (!ready_) return;
    // Calls still queued end first (every rank started them before it got
    // here), unless a rank failed: it may never post them.
    drain(true);
    // The other members' verdicts on our declines (they made every call
    // before they got here): received before the groups go.
    if (hier_ != nullptr) advance_background(Sweep::All);
    // A rank failed: calls left in the queue end here, their exchanges
    // while the groups still exist, and with an error: a caller's handle
    // may outlive us (MPI_Comm_free with a request outstanding), and one
    // that is not finished would come back to this freed communicator.
    for (auto& op : queue_) {
        op->verdict.reset();
        if (op->finished.load(std::memory_order_relaxed)) continue;
        op->status = GPUCOLL_ERR_INTERNAL;
        op->error = "call " + std::to_string(op->seq) +
                    " was still waiting for a rank that failed an earlier call when its "
                    "communicator was freed";
        op->done = true;
        op->finished.store(true, std::memory_order_release);
    }
    queue_.clear();
    queued_.store(0, std::memory_order_release);
    update_busy();
    background_.clear();
    spare_exchanges_.clear();
    // Waits below end early once any rank failed a call: a failed rank may
    // never get as far as its peers expect.
    auto wait_for = [this](const std::atomic<uint64_t>& word, uint64_t value) {
        for (unsigned spins = 0; segment_.load_acquire(word) < value && !aborted(); ++spins) {
            if (spins % 16 == 0) idle();
            sched_yield();
        }
    };
    // 1. Every peer posted our last call (so finished those before) and, if
    //    that call ran accelerated, finished it: one-shot peers read our
    //    scratch after we return.
    if (gate_.seq > 0) {
        const uint64_t step = last_accelerated_ == gate_.seq ? kStepDone : 0;
        for (int p = 0; p < size_; ++p)
            if (p != rank_) wait_for(segment_.slot(p).progress, progress_word(gate_.seq, step));
    }
    // 2. Unmap every peer's buffers, say so (always: peers wait for it), and
    //    wait until all peers did.
    internal_imports_.clear();
    scratch_mappings_.clear();
    segment_.store_release(segment_.slot(rank_).closed, 1);
    for (int p = 0; p < size_; ++p)
        if (p != rank_) wait_for(segment_.slot(p).closed, 1);
    // 3. Our buffers are freed by the members' destructors; after a failure a
    //    peer may still map them, so they are leaked instead.
    if (aborted()) {
        for (DeviceBuffer* b : {&scratch_, &temp_, &result_, &copy_send_, &copy_recv_}) b->leak();
        for (DeviceBuffer& b : retired_) b.leak();
    }
}

void NodeComm::attach(inter::Hierarchy* hierarchy) {
    hier_ = hierarchy;
    const inter::Topology& t = hierarchy->topo();
    call_size_ = t.size;
    global_of_ = t.members[t.node];
}

BufferBytes NodeComm::bytes_of(const gpucoll_call_t& call, int p) const {
    return buffer_bytes(call, call_size_, global_of_[p], reduce::dtype_size(call.dtype));
}

char* NodeComm::scratch_slot(int p, uint64_t seq) const {
    return peer_scratch_[p] + kFlagBytes + (seq % 2) * scratch_slot_bytes_;
}

uint64_t* NodeComm::flag(int p) const { return reinterpret_cast<uint64_t*>(peer_scratch_[p]); }

Status NodeComm::wait_stream(uint64_t seq) {
    // Poll rather than block: Open MPI's communication must progress meanwhile.
    bool released = false;
    WaitWatch watch(config_.wait_warning_s);
    for (unsigned spins = 0;; ++spins) {
        bool complete = false;
        GPUCOLL_TRY(stream_->query(&complete));
        if (complete) return stream_->synchronize();
        if (kernels_wait_on_flags() && !released &&
            segment_.load_acquire(segment_.header().abort) == seq) {
            for (int p = 0; p < size_; ++p)
                if (p != rank_)
                    (void)device_->write_flag(flag(p), progress_word(seq, kStepDone), nullptr);
            released = true;
        }
        if (spins % 16 == 0 && idle(watch)) {
            warn_waiting(false, "this rank's GPU work of call %llu%s",
                         static_cast<unsigned long long>(seq),
                         kernels_wait_on_flags() ? " (it waits on the peers' steps)" : "");
        }
        sched_yield();
    }
}

// ---------------------------------------------------------------- progress

int NodeComm::fail(Status s, uint64_t seq) {
    uint64_t none = 0;  // first: peers stop waiting as soon as possible
    segment_.header().abort.compare_exchange_strong(none, seq, std::memory_order_acq_rel);
    poisoned_ = true;
    const std::string why = last_error();
    if (hier_ != nullptr) hier_->abort(seq);  // the other nodes stop waiting too
    if (stream_ != nullptr) {
        // Device flags: peers' stream-ordered waits for this call must end,
        // and so must the work still queued on our stream (it may wait on
        // peers that, in turn, wait on us). Host flags: the queued work must
        // end before we return, and steps not yet published never are.
        if (kernels_wait_on_flags())
            device_->write_flag(flag(rank_), progress_word(seq, kStepDone), nullptr);
        wait_stream(seq);
        // Step writes still queued when we failed ran during the wait and
        // may have put a lower value over kStepDone: write it again, now
        // that nothing is queued behind it.
        if (kernels_wait_on_flags())
            device_->write_flag(flag(rank_), progress_word(seq, kStepDone), nullptr);
        drop_pending_signals();
    }
    log(0 /* always */, "accelerated call %llu failed: %s; this communicator stages from now on",
        static_cast<unsigned long long>(seq), why.c_str());
    set_error(s, "%s", why.c_str());
    return s;
}

bool NodeComm::aborted() const { return segment_.load_acquire(segment_.header().abort) != 0; }

Status NodeComm::signal_after_stream(uint64_t word) {
    uint64_t ticket = 0;
    GPUCOLL_TRY(stream_->mark(&ticket));
    pending_signals_.emplace_back(ticket, word);
    return publish_reached();
}

Status NodeComm::publish_reached() {
    uint64_t word = 0;
    while (!pending_signals_.empty()) {
        bool done = false;
        GPUCOLL_TRY(stream_->reached(pending_signals_.front().first, &done));
        if (!done) break;
        word = pending_signals_.front().second;
        pending_signals_.pop_front();
    }
    if (word != 0) segment_.store_release(segment_.slot(rank_).progress, word);
    return kSuccess;
}

Status NodeComm::wait_progress(int peer, uint64_t word, bool abortable) {
    const std::atomic<uint64_t>& flag = segment_.slot(peer).progress;
    const uint64_t seq = word >> kStepBits;
    WaitWatch watch(config_.wait_warning_s);
    for (unsigned spins = 0;; ++spins) {
        if (segment_.load_acquire(flag) >= word) {
            // A peer that failed this call moves on to the next one, whose
            // post passes every step of this one: it set the abort word
            // before, so the acquire above makes it visible here.
            if (abortable && segment_.load_acquire(segment_.header().abort) == seq) break;
            return kSuccess;
        }
        // Peers may be waiting for our steps while we wait for theirs.
        if (!pending_signals_.empty()) GPUCOLL_TRY(publish_reached());
        if (abortable && segment_.load_acquire(segment_.header().abort) == seq) break;
        if (pause_or_yield(spins, watch)) {
            const unsigned step = static_cast<unsigned>(word & kStepDone);
            if (step == 0)
                warn_waiting(true, "rank %d (this node) to enter call %llu", global_rank(peer),
                             static_cast<unsigned long long>(seq));
            else
                warn_waiting(false, "rank %d (this node) to finish step %u of call %llu",
                             global_rank(peer), step, static_cast<unsigned long long>(seq));
        }
    }
    return set_error(GPUCOLL_ERR_INTERNAL,
                     "a peer failed during this gpucoll collective; see its error output");
}

Status NodeComm::wait_all_seen(uint64_t word) {
    if (word <= min_seen_) return kSuccess;  // most calls: nothing to read
    uint64_t least = UINT64_MAX;
    for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        if (peer_seen_[p] < word) {
            GPUCOLL_TRY(wait_progress(p, word, false));
            peer_seen_[p] = segment_.load_acquire(segment_.slot(p).progress);
        }
        least = std::min(least, peer_seen_[p]);
    }
    min_seen_ = least;
    return kSuccess;
}

void NodeComm::log(int level, const char* fmt, ...) const {
    if (config_.verbose < level) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    // Open MPI's output functions are not for threads it does not know.
    if (ProgressAgent::on_agent_thread())
        std::fprintf(stderr, "gpucoll[rank %d, progress thread]: %s\n", global_rank(rank_), msg);
    else if (config_.log != nullptr)
        config_.log(level, msg);
    else
        std::fprintf(stderr, "gpucoll[%d]: %s\n", global_rank(rank_), msg);
}

void NodeComm::warn_waiting(bool arrival, const char* fmt, ...) const {
    char whom[192];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(whom, sizeof whom, fmt, ap);
    va_end(ap);
    const bool uniform = config_.uniform_memory != 0 && hier_ != nullptr;
    log(0 /* always */, "%s",
        wait_warning_text(config_.wait_warning_s, whom, arrival, uniform).c_str());
}

void NodeComm::idle() const {
    if (ProgressAgent::on_agent_thread())
        sched_yield();  // other communicators have threads of their own
    else if (config_.progress != nullptr)
        config_.progress();
}

bool NodeComm::idle(WaitWatch& watch) const {
    idle();
    // A progress thread's waits are the background of nonblocking calls (a
    // peer computing before its next call is normal there): only the
    // application's own threads say they wait.
    return !ProgressAgent::on_agent_thread() && watch.due();
}

// ---------------------------------------------------------------- one call

namespace {

// Device memory whose allocation the backend knows (a pointer the driver
// describes only partly is device memory, but only the staged path takes it).
// *out: what the query said (prepare describes the buffer from it).
Status check_device(Device* d, const void* p, size_t bytes, const char* which, PointerInfo* out) {
    PointerInfo& info = *out;
    if (p == nullptr || d->query(p, &info) != kSuccess || info.type != GPUCOLL_MEM_DEVICE)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "%s %p: host memory", which, p);
    if (!info.complete) {
        const std::string why = last_error();
        return set_error(GPUCOLL_ERR_DEVICE, "%s %p: allocation unknown (%s)", which, p,
                         why.c_str());
    }
    return check_extent(info, p, bytes, which);
}

}  // namespace

Status NodeComm::grow(DeviceBuffer& buffer, size_t bytes) {
    if (buffer.data() != nullptr && buffer.size() >= bytes) return kSuccess;
    const size_t want = std::max(bytes, 2 * buffer.size());
    if (buffer.data() != nullptr) retired_.push_back(std::move(buffer));
    return buffer.allocate(device_, want);
}

Status NodeComm::describe_internal(const DeviceBuffer& buffer, BufferDesc* desc) {
    GPUCOLL_TRY(cache_->describe(device_, buffer.data(), desc));
    desc->internal = 1;
    return kSuccess;
}

// Memory IPC cannot export (cudaMallocAsync pools, cuMemCreate) is replaced by
// an exportable copy: peers work on the copy, and the results are copied back
// after the call. Local copies only: the bytes between peers stay the same.
Status NodeComm::describe_or_copy(const void* user, const PointerInfo& info, size_t bytes,
                                  bool copy_in, DeviceBuffer& copy, BufferDesc* desc,
                                  const void** used) {
    *used = user;
    if (user == nullptr || bytes == 0) return kSuccess;  // nobody's to read: not posted
    const Status s = cache_->describe(device_, user, info, desc);
    if (s != GPUCOLL_ERR_UNSUPPORTED) return s;
    GPUCOLL_TRY(grow(copy, bytes));
    if (copy_in) GPUCOLL_TRY(device_->memcpy(copy.data(), user, bytes, nullptr));
    *used = copy.data();
    return describe_internal(copy, desc);
}

Status NodeComm::check_user_buffers(const gpucoll_call_t& call, const BufferBytes& bytes,
                                    PointerInfo* send_info, PointerInfo* recv_info) const {
    if (bytes.send != 0)
        GPUCOLL_TRY(check_device(device_, call.sendbuf, bytes.send, "send buffer", send_info));
    if (bytes.recv != 0)
        GPUCOLL_TRY(check_device(device_, call.recvbuf, std::max(bytes.recv, bytes.out),
                                 "receive buffer", recv_info));
    const bool reduction = call.coll != GPUCOLL_COLL_BCAST && call.coll != GPUCOLL_COLL_ALLGATHER;
    if (reduction && !device_->reduce_supported(call.dtype, call.op))
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "%s %s: no device reduction on this backend",
                         gpucoll_op_name(call.op), gpucoll_dtype_name(call.dtype));
    return kSuccess;
}

// The user's buffers must be on the GPU this communicator works on (where
// its stream, scratch and mappings are): a kernel there cannot reach
// another GPU's memory. GPUCOLL_REBIND otherwise.
Status NodeComm::check_on_our_device(const BufferBytes& bytes, const PointerInfo& send_info,
                                     const PointerInfo& recv_info) const {
    int other = -1;
    if (bytes.send != 0 && send_info.device != ordinal_) other = send_info.device;
    if (bytes.recv != 0 && recv_info.device != ordinal_) other = recv_info.device;
    if (other < 0 && ordinal_ >= 0) return kSuccess;
    rebind_device_.store(other, std::memory_order_relaxed);
    if (ordinal_ < 0)
        return set_error(GPUCOLL_REBIND,
                         "buffers on GPU %d, but the communicator was set up before this process "
                         "chose a GPU",
                         other);
    return set_error(GPUCOLL_REBIND,
                     "buffers on GPU %d, but the communicator was set up on GPU %d (its first "
                     "collective ran before the application chose its GPU)",
                     other, ordinal_);
}

Status NodeComm::prepare(const gpucoll_call_t& call, gpucoll_algorithm_t algo, uint64_t seq,
                         Prepared* out, const Plan* plan) {
    const Algorithm* a = find_algorithm(call.coll, algo);
    const size_t elem = reduce::dtype_size(call.dtype);
    const BufferBytes bytes = bytes_of(call, rank_);
    out->call = call;
    // A plan checked and described the user's buffers once; else query them
    // now, once for the checks and the descriptors.
    const bool planned = plan != nullptr && plan->described;
    PointerInfo send_info, recv_info;
    if (!planned) {
        const timing::Scope timed(call.coll, timing::kCheck);
        GPUCOLL_TRY(check_user_buffers(call, bytes, &send_info, &recv_info));
        GPUCOLL_TRY(check_on_our_device(bytes, send_info, recv_info));
    }
    timing::Scope describing(call.coll, timing::kDescribe);
    if (a->needs_result) GPUCOLL_TRY(grow(result_, std::max<size_t>(bytes.out, 1)));
    if (a->temp_bytes != nullptr) {
        GPUCOLL_TRY(grow(temp_, a->temp_bytes(call, call_size_, elem)));
        GPUCOLL_TRY(describe_internal(temp_, &out->desc[kTempBuf]));
    }
    if (a->posts_buffers && planned) {
        out->desc[kSendBuf] = plan->send;
        out->desc[kRecvBuf] = plan->recv;
    } else if (a->posts_buffers) {
        const void* used = nullptr;
        GPUCOLL_TRY(describe_or_copy(call.sendbuf, send_info, bytes.send, true, copy_send_,
                                     &out->desc[kSendBuf], &used));
        out->call.sendbuf = used;
        GPUCOLL_TRY(describe_or_copy(call.recvbuf, recv_info, bytes.recv, bytes.recv_is_input,
                                     copy_recv_, &out->desc[kRecvBuf], &used));
        out->recv_copied = used != call.recvbuf;
        out->call.recvbuf = const_cast<void*>(used);
    }
    describing.stop();
    if (a->input_in_scratch) {
        const timing::Scope timed(call.coll, timing::kScratch);
        // Our slot for this call was last read by peers two calls ago: every
        // peer has moved on once it posted the previous call.
        if (seq > 1) GPUCOLL_TRY(wait_all_seen(progress_word(seq - 1, 0)));
        const void* in = call.sendbuf != nullptr ? call.sendbuf : call.recvbuf;
        GPUCOLL_TRY(device_->memcpy(scratch_slot(rank_, seq), in, call.count * elem, nullptr));
    }
    return kSuccess;
}

void NodeComm::post(uint64_t seq, PostKind kind, const Prepared* prepared,
                    const CallSignature* sig) {
    // A decline writes no post (its kind word stays an earlier call's:
    // kind_of), so on one node it waits for nobody. Any other post must not
    // overwrite one a peer may still have to read: it waits until every
    // peer posted seq - kPostDepth + 1 (every rank posts every call, so the
    // wait ends). Between nodes declines wait too: local rank 0's verdict
    // words (kPostDepth of them) need every rank within the post window.
    if (seq >= kPostDepth && windowed(kind == PostKind::Decline))
        wait_all_seen(progress_word(seq - kPostDepth + 1, 0));
    if (kind != PostKind::Decline) {
        Post& post = segment_.slot(rank_).posts[seq % kPostDepth];
        if (kind == PostKind::Accelerate)  // peers read descriptors of accelerated posts only
            for (int b = 0; b < kPostedBuffers; ++b) post.buf[b] = prepared->desc[b];
        if (sig != nullptr) post.sig = *sig;
    }
    publish_post(seq, kind);
}

int NodeComm::failed_by_peer() {
    return set_error(GPUCOLL_ERR_INTERNAL,
                     "a peer failed this gpucoll collective; see its error output");
}

int NodeComm::decline() {
    drain();  // calls started before this one end first
    GPUCOLL_TRY(take_pending_rebind());
    int status;
    {
        const Busy busy(this);
        status = decline_now();
    }
    post_deferred();
    return status;
}

// A blocking call of ours runs from its sequence number to its end; a
// nonblocking call started from inside its waits (Open MPI's progress engine
// starts other calls wherever it runs) would take the next number and post
// in the middle of it: its peers would read a post not yet written, and our
// progress word would run ahead of our steps. Such a call waits in the
// queue until the blocking one ended (progress() returns at once while
// advancing_), then posts here. The order of the two calls must still be
// the same on every rank, as MPI requires of an application's calls; Open
// MPI's own calls started from its progress engine (MPI_Comm_idup's) do not
// keep it, and never come here (the component hands them to Open MPI).
NodeComm::Busy::Busy(NodeComm* comm) : comm_(comm), was_(comm->advancing_) {
    comm->advancing_ = true;
}

NodeComm::Busy::~Busy() { comm_->advancing_ = was_; }

void NodeComm::post_deferred() {
    if (!advancing_ && !queue_.empty()) enqueued();
}

int NodeComm::settle() {
    if (queued_.load(std::memory_order_acquire) == 0 &&
        !rebind_pending_.load(std::memory_order_relaxed))
        return GPUCOLL_SUCCESS;
    drain();
    GPUCOLL_TRY(take_pending_rebind());
    return GPUCOLL_SUCCESS;
}

Status NodeComm::take_pending_rebind() {
    if (!rebind_pending_.exchange(false)) return kSuccess;
    update_busy();
    t_rebind_device = pending_rebind_device_;
    return set_error(GPUCOLL_REBIND,
                     "a nonblocking call found buffers on another GPU than the one this "
                     "communicator was set up on: setting it up again on every rank");
}

int NodeComm::decline_now(bool may_wait) {
    // Every rank posts every call (host-buffer ranks through here, without
    // looking at the call), so the sequence numbers stay equal everywhere.
    const uint64_t seq = ++gate_.seq;
    post(seq, PostKind::Decline, nullptr, nullptr);
    if (hier_ != nullptr) return decline_between_nodes(seq, may_wait);
    if (segment_.load_acquire(segment_.header().abort) == seq) return failed_by_peer();
    return GPUCOLL_DECLINED;
}

// Between nodes every call is agreed, declines included: the other nodes
// must learn that this one stages. A rank outside the exchange (uneven
// nodes, not local rank 0) leaves it to its leader, which reads its post.
int NodeComm::decline_between_nodes(uint64_t seq, bool may_wait) {
    if (hier_->verdict_group() != nullptr) {
        const Status s = send_decline(seq, may_wait);
        if (s != kSuccess) return fail(s, seq);
    }
    if (segment_.load_acquire(segment_.header().abort) == seq) return failed_by_peer();
    return GPUCOLL_DECLINED;
}

Status NodeComm::send_decline(uint64_t seq, bool may_wait) {
    advance_background(Sweep::Once);
    inter::Verdict mine;
    mine.code = inter::kDecline;
    mine.rank = global_rank(rank_);
    std::shared_ptr<inter::VerdictExchange> x;
    if (spare_exchanges_.empty()) {
        x = std::make_shared<inter::VerdictExchange>();
    } else {
        x = std::move(spare_exchanges_.back());
        spare_exchanges_.pop_back();
    }
    GPUCOLL_TRY(hier_->start_exchange(seq, mine, x.get()));
    // A decline decides the call: local rank 0 publishes it for the ranks
    // of this node outside the exchange (uneven nodes) at once.
    if (rank_ == 0) segment_.store_release(verdict_word(seq), progress_word(seq, inter::kDecline));
    background_.emplace_back(seq, std::move(x));
    // Only a blocking decline may wait: a nonblocking start must stay local
    // (the other node may make these calls after a message from us).
    if (may_wait && background_.size() > kBackgroundMax) advance_background(Sweep::Bound);
    return kSuccess;
}

void NodeComm::advance_background(Sweep how) {
    const bool wait_all = how == Sweep::All;
    const size_t keep = wait_all ? 0 : kBackgroundMax;
    const auto start = std::chrono::steady_clock::now();
    WaitWatch watch(how == Sweep::Bound ? config_.wait_warning_s : 0);  // teardown: its own bound
    for (unsigned spins = 0; !background_.empty(); ++spins) {
        for (auto it = background_.begin(); it != background_.end();) {
            bool done = false;
            inter::Verdict ignored;
            // A failed exchange (a member's abort, a lost peer) is dropped:
            // the call it belonged to was declined already.
            const bool failed =
                hier_->test_exchange(it->first, it->second.get(), &done, &ignored) != kSuccess;
            if (!failed && !done) {
                ++it;
                continue;
            }
            if (done && spare_exchanges_.size() < 8)  // every request ended: reusable
                spare_exchanges_.push_back(std::move(it->second));
            it = background_.erase(it);
        }
        if (how == Sweep::Once || background_.size() <= keep || (wait_all && aborted())) break;
        // A member that never answers (gone without an abort: the job ends
        // anyway) must not hold a teardown forever.
        if (wait_all && spins % 256 == 255 &&
            std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) {
            log(1, "%zu declined calls still without every other node's verdict at teardown",
                background_.size());
            background_.clear();  // their receives are cancelled
            break;
        }
        if (spins % 16 == 15 && idle(watch)) {
            warn_waiting(true,
                         "the other nodes' answer to this rank's declined call %llu (more "
                         "than %zu declined calls are waiting for theirs)",
                         static_cast<unsigned long long>(background_.front().first),
                         kBackgroundMax);
        }
        sched_yield();
    }
}

inter::Verdict NodeComm::local_verdict(uint64_t seq, const CallSignature& sig) const {
    // Someone declined: everyone stages (a refusing rank's staged path
    // reports its own buffer). Else a refusal, or calls that differ, fail the
    // call on every rank before anyone touches a peer's memory.
    inter::Verdict v;
    v.rank = global_rank(rank_);
    v.sig = sig;
    for (int p = 0; p < size_; ++p)
        if (kind_of(p, seq) == PostKind::Decline) {
            v.code = inter::kDecline;
            v.rank = global_rank(p);
            return v;
        }
    for (int p = 0; p < size_; ++p) {
        const Post& theirs = post_of(p, seq);
        const PostKind kind = kind_of(p, seq);
        if (kind == PostKind::Refuse || !(theirs.sig == sig)) {
            v.code = kind == PostKind::Refuse ? inter::kRefuse : inter::kMismatch;
            v.rank = global_rank(p);
            v.sig = theirs.sig;
            return v;
        }
    }
    // Every rank passed device memory, some of it on another GPU: all set
    // the communicator up again (nothing was touched).
    for (int p = 0; p < size_; ++p)
        if (kind_of(p, seq) == PostKind::Rebind) {
            v.code = inter::kRebind;
            v.rank = global_rank(p);
            return v;
        }
    return v;
}

Status NodeComm::global_verdict(uint64_t seq, inter::Verdict* v) {
    if (hier_->verdict_group() != nullptr) {
        const inter::Verdict mine = *v;
        GPUCOLL_TRY(hier_->exchange(seq, mine, v));
        if (rank_ == 0) segment_.store_release(verdict_word(seq), progress_word(seq, v->code));
        return kSuccess;
    }
    // Uneven nodes: local rank 0 exchanged for this node.
    const std::atomic<uint64_t>& word = verdict_word(seq);
    WaitWatch watch(config_.wait_warning_s);
    for (unsigned spins = 0; segment_.load_acquire(word) < progress_word(seq, 0); ++spins) {
        if (segment_.load_acquire(segment_.header().abort) == seq)
            return set_error(GPUCOLL_ERR_INTERNAL,
                             "a peer failed during this gpucoll collective; see its error output");
        if (spins % 16 == 15 && idle(watch)) {
            warn_waiting(true,
                         "rank %d (this node's first) to publish the other nodes' verdict on "
                         "call %llu",
                         global_rank(0), static_cast<unsigned long long>(seq));
        }
        sched_yield();
    }
    const uint64_t got = segment_.load_acquire(word);
    if ((got >> kStepBits) != seq || (got & kStepDone) < inter::kAccelerate ||
        (got & kStepDone) > inter::kDecline)
        return set_error(GPUCOLL_ERR_INTERNAL, "local rank 0 published no verdict for call %llu",
                         static_cast<unsigned long long>(seq));
    if ((got & kStepDone) != v->code) {
        v->code = static_cast<uint32_t>(got & kStepDone);
        v->rank = -1;  // on another node; its own output names it
    }
    return kSuccess;
}

Status NodeComm::advance_verdict(Pending& op, bool* ready) {
    if (op.verdict == nullptr) op.verdict = std::make_shared<inter::VerdictExchange>();
    inter::VerdictExchange& x = *op.verdict;
    *ready = x.known;
    if (x.known) return kSuccess;
    // Mine needs every local post (declines ended in begin()).
    if (!peers_posted(op.seq)) return kSuccess;
    if (hier_->verdict_group() == nullptr) {
        // Uneven nodes, not local rank 0: the leader exchanges for this
        // node and publishes the outcome.
        const uint64_t got = segment_.load_acquire(verdict_word(op.seq));
        if (got < progress_word(op.seq, 0)) {
            if (segment_.load_acquire(segment_.header().abort) == op.seq)
                return set_error(GPUCOLL_ERR_INTERNAL,
                                 "a peer failed during this gpucoll collective; see its "
                                 "error output");
            return kSuccess;
        }
        x.result = local_verdict(op.seq, op.sig);
        GPUCOLL_TRY(global_verdict(op.seq, &x.result));  // reads the word, now there
        x.known = *ready = true;
        return kSuccess;
    }
    if (!x.started) {
        x.started = true;
        GPUCOLL_TRY(hier_->start_exchange(op.seq, local_verdict(op.seq, op.sig), &x));
    }
    bool done = false;
    GPUCOLL_TRY(hier_->test_exchange(op.seq, &x, &done, &x.result));
    if (!done) return kSuccess;
    if (rank_ == 0)  // for the ranks of this node outside the exchange
        segment_.store_release(verdict_word(op.seq), progress_word(op.seq, x.result.code));
    x.known = *ready = true;
    return kSuccess;
}

int NodeComm::run(const gpucoll_call_t& call) {
    const uint64_t t0 = timing::on() ? timing::now_ns() : 0;
    // Our GPU, whatever the calling thread's (restored on return).
    DeviceScope on_device;
    const Status bound = on_device.enter(device_, ordinal_);
    drain();  // calls started before this one end first
    if (const Status s = take_pending_rebind(); s != kSuccess) return s;
    if (t0 != 0) timing::add(call.coll, timing::kEnter, timing::now_ns() - t0);
    Pending op;
    op.call = call;
    if (bound != kSuccess) {  // staged, with the others (a post of ours they wait for)
        log(1, "cannot make GPU %d current: %s; declining", ordinal_, last_error());
        op.decline_only = true;
    }
    rebind_device_.store(-1, std::memory_order_relaxed);
    int status;
    {
        const Busy busy(this);
        begin(op);
        status = op.done ? op.status : conclude(op);
    }
    // Every rank sets the communicator up again, this thread right away:
    // there, on the GPU of the buffers that asked for it (the thread's
    // current GPU may be another, or none: a thread that never chose one
    // would set up on none again, and rebind at every call). Read before a
    // deferred call's prepare() writes it again.
    if (status == GPUCOLL_REBIND) t_rebind_device = rebind_device_.load(std::memory_order_relaxed);
    post_deferred();
    if (t0 != 0)
        timing::add(call.coll, status == GPUCOLL_SUCCESS ? timing::kCore : timing::kDecline,
                    timing::now_ns() - t0);
    return status;
}

// Chooses the algorithm and posts the call (or its decline). op.done when
// nothing is left to do (declined, or failed to post).
void NodeComm::begin(Pending& op) {
    const gpucoll_call_t& call = op.call;
    const size_t elem = reduce::dtype_size(call.dtype);
    op.begun = true;
    timing::Scope selecting(call.coll, timing::kSelect);
    op.algo = op.decline_only ? GPUCOLL_ALGO_STAGED
              : op.plan       ? op.plan->algo
              : elem == 0     ? GPUCOLL_ALGO_STAGED
              : hier_ != nullptr
                  ? algo::select_hierarchical(call, hier_->topo(), elem, config_, &op.why)
                  : select_algorithm(call, size_, elem, config_, scratch_slot_bytes_, ring_family_,
                                     &op.why, &model_table_, &measured_);
    if (op.plan) op.why = op.plan->why;
    if (!op.plan && hier_ == nullptr) op.algo = with_one_kernel(call, elem, op.algo, &op.why);
    selecting.stop();
    // Staged by size or configuration (the same decision on every rank that
    // looks at the call), or a rank that failed a call: decline.
    const uint64_t failed = segment_.load_acquire(segment_.header().abort);
    if (op.algo == GPUCOLL_ALGO_STAGED || poisoned_ || failed != 0) {
        // Between nodes the decline leaves now, also for a queued call: its
        // rank may poll other calls only, and must not hold the others up.
        op.status = decline_now(!op.queued);
        op.done = true;
        return;
    }
    const uint64_t seq = op.seq = ++gate_.seq;
    if (call.eligible) {
        const Status ps = prepare(call, op.algo, seq, &op.prepared, op.plan.get());
        if (ps == kSuccess) {
            op.kind = PostKind::Accelerate;
        } else if (ps == GPUCOLL_ERR_BUFFER) {
            op.kind = PostKind::Refuse;  // wait for the others: all fail unless one declined
            op.refusal = last_error();
        } else if (ps == GPUCOLL_REBIND) {
            // Wait for the others: all set up again, unless one declined or
            // refused. A nonblocking call cannot do it (that waits for every
            // rank): it is staged, and the next blocking collective or
            // barrier does it (rebind_pending_).
            op.kind = PostKind::Rebind;
            op.rebind_device = rebind_device_.load(std::memory_order_relaxed);
            if (!op.queued || !warned_other_device_)
                log(1, "call %llu: %s; setting the communicator up again on every rank%s",
                    static_cast<unsigned long long>(seq), last_error(),
                    op.queued ? " at the next blocking collective or barrier (this call and "
                                "those until then are staged)"
                              : "");
            warned_other_device_ = warned_other_device_ || op.queued;
        } else if (config_.verbose >= 10) {
            log(10, "call %llu: declining: %s", static_cast<unsigned long long>(seq), last_error());
        }
    }
    if (op.kind == PostKind::Decline) {  // our own answer decides; peers read nothing else
        post(seq, op.kind, nullptr, nullptr);
        op.status = hier_ != nullptr ? decline_between_nodes(seq, !op.queued) : GPUCOLL_DECLINED;
        op.done = true;
        return;
    }
    op.sig = CallSignature{call.coll, call.dtype, call.op, call.root,
                           call_bytes(call, call_size_, elem)};
    const timing::Scope timed(call.coll, timing::kPost);
    post(seq, op.kind, &op.prepared, &op.sig);
}

// The rest of a posted call: the agreement, the algorithm, the end.
int NodeComm::conclude(Pending& op) {
    const gpucoll_call_t& call = op.call;
    const uint64_t seq = op.seq;
    const size_t elem = reduce::dtype_size(call.dtype);
    CallContext ctx(*this, op.prepared.call, seq);
    Status s = kSuccess;
    timing::Scope agreeing(call.coll, timing::kAgree);
    for (int p = 0; p < size_ && s == kSuccess; ++p)  // the agreement round: host flags
        if (p != rank_) s = wait_progress(p, progress_word(seq, 0), true);
    if (s != kSuccess) return fail(s, seq);
    ++ctx.rounds;
    inter::Verdict v = local_verdict(seq, op.sig);
    if (op.verdict != nullptr && op.verdict->known)
        v = op.verdict->result;  // exchanged while the call was in flight
    else if (hier_ != nullptr && (s = global_verdict(seq, &v)) != kSuccess)
        return fail(s, seq);
    agreeing.stop();
    if (v.code == inter::kDecline) return GPUCOLL_DECLINED;
    if (v.code == inter::kRebind) return GPUCOLL_REBIND;
    if (v.code == inter::kRefuse) {
        if (v.rank == global_rank(rank_))
            return set_error(GPUCOLL_ERR_BUFFER, "%s", op.refusal.c_str());
        return set_error(GPUCOLL_ERR_BUFFER,
                         "rank %d's buffers do not fit this %s; see its error output", v.rank,
                         gpucoll_coll_name(call.coll));
    }
    if (v.code == inter::kMismatch) {
        if (v.rank < 0)
            return set_error(GPUCOLL_ERR_BUFFER,
                             "the ranks called different collectives (see the output of the "
                             "other nodes); nothing was moved");
        return set_error(GPUCOLL_ERR_BUFFER,
                         "the ranks called different collectives: rank %d: %s of %llu bytes "
                         "(root %d), rank %d: %s of %llu bytes (root %d); nothing was moved",
                         v.rank, gpucoll_coll_name(static_cast<gpucoll_coll_t>(v.sig.coll)),
                         static_cast<unsigned long long>(v.sig.bytes), v.sig.root,
                         global_rank(rank_), gpucoll_coll_name(call.coll),
                         static_cast<unsigned long long>(op.sig.bytes), op.sig.root);
    }

    // The application's work on the default stream (its last writes to our
    // buffers) comes first.
    {
        const timing::Scope timed(call.coll, timing::kOrder);
        if (stream_ != nullptr && (s = stream_->after_default_stream()) != kSuccess)
            return fail(s, seq);
    }
    {
        const timing::Scope timed(call.coll, timing::kAlgorithm);
        if ((s = find_algorithm(call.coll, op.algo)->run(ctx)) != kSuccess) return fail(s, seq);
    }
    {
        const timing::Scope timed(call.coll, timing::kFinish);
        if ((s = ctx.finish()) != kSuccess) return fail(s, seq);
    }
    const timing::Scope tail(call.coll, timing::kTail);
    last_accelerated_ = seq;
    if (op.prepared.recv_copied) {
        const size_t out = bytes_of(call, rank_).out;
        if ((s = device_->memcpy(call.recvbuf, op.prepared.call.recvbuf, out, nullptr)) != kSuccess)
            return fail(s, seq);
    }
    const uint64_t inter_bytes = hier_ != nullptr ? hier_->take_bytes_sent() : 0;
    if (config_.verbose >= 10)
        log(10,
            "call %llu (%s): %s %s, %zu bytes: %llu bytes across IPC, %llu to other nodes%s%s, "
            "%llu rounds (%s)",
            static_cast<unsigned long long>(seq), gpucoll_form_name(op.form),
            gpucoll_coll_name(call.coll), gpucoll_algorithm_name(op.algo),
            call_bytes(call, call_size_, elem), static_cast<unsigned long long>(ctx.bytes_peer),
            static_cast<unsigned long long>(inter_bytes), hier_ != nullptr ? " over " : "",
            hier_ != nullptr ? hier_->description().c_str() : "",
            static_cast<unsigned long long>(ctx.rounds), op.why);
    CallRecord record{call.coll,  GPUCOLL_PATH_ACCELERATED,       0, ctx.bytes_peer,
                      ctx.rounds, gpucoll_algorithm_name(op.algo)};
    record.bytes_inter = inter_bytes;
    record.form = op.form;
    record.planned = op.plan != nullptr && op.plan->described;
    counters_record(record);
    return GPUCOLL_SUCCESS;
}

// ---------------------------------------------------------------- nonblocking calls

std::shared_ptr<NodeComm::Pending> NodeComm::start(const gpucoll_call_t& call,
                                                   gpucoll_form_t form) {
    auto op = std::make_shared<Pending>();
    op->call = call;
    op->form = form;
    op->queued = true;
    if (call.counts != nullptr) {  // reduce_scatter: the caller's array may go
        op->counts.assign(call.counts, call.counts + call_size_);
        op->call.counts = op->counts.data();
    }
    queue_.push_back(op);
    queued_.fetch_add(1, std::memory_order_relaxed);
    update_busy();
    enqueued();
    return op;
}

std::shared_ptr<NodeComm::Plan> NodeComm::make_plan(const gpucoll_call_t& call) {
    auto plan = std::make_shared<Plan>();
    plan->call = call;
    plan->comm_id = id_;
    if (call.counts != nullptr) {
        plan->counts.assign(call.counts, call.counts + call_size_);
        plan->call.counts = plan->counts.data();
    }
    const size_t elem = reduce::dtype_size(call.dtype);
    plan->algo = elem == 0 ? GPUCOLL_ALGO_STAGED
                           : select_algorithm(plan->call, size_, elem, config_, scratch_slot_bytes_,
                                              ring_family_, &plan->why, &model_table_, &measured_);
    if (elem != 0 && hier_ == nullptr)
        plan->algo = with_one_kernel(plan->call, elem, plan->algo, &plan->why);
    if (plan->algo == GPUCOLL_ALGO_STAGED || !call.eligible) return plan;
    // Describe the user's buffers once where that works as it is; anything
    // else (a copy of unexportable memory, an error every rank must learn
    // of at each start) is left to each start.
    PointerInfo send_info, recv_info;
    const BufferBytes bytes = bytes_of(plan->call, rank_);
    if (check_user_buffers(plan->call, bytes, &send_info, &recv_info) != kSuccess ||
        check_on_our_device(bytes, send_info, recv_info) != kSuccess)
        return plan;
    if (bytes.send != 0 &&
        cache_->describe(device_, call.sendbuf, send_info, &plan->send) != kSuccess)
        return plan;
    if (bytes.recv != 0 &&
        cache_->describe(device_, call.recvbuf, recv_info, &plan->recv) != kSuccess)
        return plan;
    plan->described = true;
    return plan;
}

std::shared_ptr<NodeComm::Pending> NodeComm::start(std::shared_ptr<const Plan> plan) {
    auto op = std::make_shared<Pending>();
    op->call = plan->call;  // counts: the plan's, which the pending call keeps alive
    op->form = GPUCOLL_FORM_PERSISTENT;
    op->queued = true;
    op->plan = std::move(plan);
    queue_.push_back(op);
    queued_.fetch_add(1, std::memory_order_relaxed);
    update_busy();
    enqueued();
    return op;
}

void NodeComm::start_decline() {
    auto op = std::make_shared<Pending>();
    op->decline_only = true;
    op->queued = true;
    queue_.push_back(std::move(op));
    queued_.fetch_add(1, std::memory_order_relaxed);
    update_busy();
    enqueued();
}

// The progress agent: where asked for (eager); auto: eager where every
// process of the job on this machine can have a core for itself and one for
// its thread, lazy elsewhere (with fewer cores an eager thread takes CPU
// time from the ranks: measured 1.2-3x slower 16 KiB-1 MiB MPI_Iallreduce +
// MPI_Wait, 4 ranks on a 2-core VM; a lazy one only steps in after a
// 10-20 ms without polling, which keeps calls started in different orders
// on two communicators from waiting for each other forever).
ProgressAgent::Mode NodeComm::choose_agent_mode() const {
    if (config_.progress_thread == 0) return ProgressAgent::Mode::Off;
    if (config_.progress_thread == 1) return ProgressAgent::Mode::Eager;
    if (config_.progress_thread == 2) return ProgressAgent::Mode::Lazy;
    const unsigned local = launcher_local_processes();
    return machine_cores() >= 2 * (local > 0 ? local : static_cast<unsigned>(size_))
               ? ProgressAgent::Mode::Eager
               : ProgressAgent::Mode::Lazy;
}

// Spinning before yielding pays where the peer waited for runs on another
// core; where the job has more processes on this machine than cores, it
// most likely waits for a core, and a spin only delays it: one all-to-all
// flag round of 4 processes on the 2-core VM took 9.8 us yielding at once,
// 11 us after 32 pauses and 20.7 us after 128 (27 ns each; docs/facts.md).
// Where every process has a core, waits spin first as before. Local: it
// changes how long a wait lasts, never what a call decides.
unsigned NodeComm::spin_pauses_for() const {
    const unsigned local = launcher_local_processes();
    return machine_cores() >= (local > 0 ? local : static_cast<unsigned>(size_)) ? kSpinPauses : 0;
}

// A call joined the queue: post it now if it can be. With the progress
// agent, the call runs on its thread (or in a later test) rather than in
// the initiating call, which must not wait for the collective.
void NodeComm::enqueued() {
    const bool agent = agent_mode_ != ProgressAgent::Mode::Off;
    if (!progress(agent) && agent) ProgressAgent::instance().watch(this, agent_mode_);
}

// Posting call seq overwrites the post of call seq - kPostDepth: every peer
// must have posted the call after it (post() would wait for that). Declines
// on one node overwrite nothing: progress() does not ask for those.
bool NodeComm::can_post(uint64_t seq) const {
    if (seq < kPostDepth) return true;
    const uint64_t word = progress_word(seq - kPostDepth + 1, 0);
    for (int p = 0; p < size_; ++p)
        if (p != rank_ && peer_seen_[p] < word &&
            segment_.load_acquire(segment_.slot(p).progress) < word)
            return false;
    return true;
}

bool NodeComm::peers_posted(uint64_t seq) const {
    const uint64_t word = progress_word(seq, 0);
    for (int p = 0; p < size_; ++p)
        if (p != rank_ && segment_.load_acquire(segment_.slot(p).progress) < word) return false;
    return true;
}

bool NodeComm::progress(bool post_only) {
    if (advancing_) return queue_.empty();  // from a wait inside a call we are running
    if (queue_.empty() && background_.empty()) return true;
    // Our GPU, on whichever thread advances the queue (the progress agent's
    // has none of its own; an application thread may have another).
    DeviceScope on_device;
    if (on_device.enter(device_, ordinal_) != kSuccess)
        log(1, "cannot make GPU %d current: %s", ordinal_, last_error());
    advancing_ = true;
    if (!background_.empty()) advance_background(Sweep::Once);
    while (!queue_.empty()) {
        Pending& op = *queue_.front();
        if (!op.begun) {
            if (windowed(op.decline_only) && !can_post(gate_.seq + 1)) break;
            begin(op);
        }
        if (!op.done && hier_ != nullptr && !post_only) {
            bool ready = false;
            const Status s = advance_verdict(op, &ready);
            if (s != kSuccess) {
                op.status = fail(s, op.seq);
                op.done = true;
            } else if (!ready) {
                break;
            }
        }
        if (!op.done) {
            // A peer that failed this call has posted it (and set the abort
            // word first): conclude() reports it.
            if (post_only || !peers_posted(op.seq)) break;
            op.status = conclude(op);
            op.done = true;
            if (op.status == GPUCOLL_REBIND) {  // staged; set up again later, everywhere
                if (!rebind_pending_.load(std::memory_order_relaxed))
                    pending_rebind_device_ = op.rebind_device;
                rebind_pending_.store(true, std::memory_order_relaxed);
                update_busy();
                op.status = GPUCOLL_DECLINED;
            }
        }
        if (op.status != GPUCOLL_SUCCESS && op.status != GPUCOLL_DECLINED) op.error = last_error();
        // Its exchange ends here, while the groups exist: the caller's handle
        // may outlive this communicator.
        op.verdict.reset();
        op.finished.store(true, std::memory_order_release);
        queue_.pop_front();
        // Release: what ending the call wrote (gate_.seq, the segment) is
        // visible to a decline_unlocked that sees the queue empty.
        queued_.fetch_sub(1, std::memory_order_release);
        update_busy();
    }
    advancing_ = false;
    return queue_.empty();
}

void NodeComm::drain(bool unless_aborted) {
    if (queue_.empty()) return;  // the common case: nothing started before
    WaitWatch watch(unless_aborted ? 0 : config_.wait_warning_s);  // teardown: not a call
    size_t left = queue_.size();
    for (unsigned spins = 0; !progress() && !(unless_aborted && aborted()); ++spins) {
        if (queue_.size() < left) left = queue_.size(), watch.reset();  // one ended
        if (pause_or_yield(spins, watch) && !queue_.empty()) {
            warn_waiting(true,
                         "the nonblocking calls this rank started before to end (the "
                         "oldest: call %llu)",
                         static_cast<unsigned long long>(queue_.front()->seq));
        }
    }
}

Status NodeComm::resolve_internal(int p, const BufferDesc& desc, void** out, size_t* mapped) {
    if (pids_[p] == getpid()) {  // a thread-rank of this process
        *out = reinterpret_cast<char*>(desc.base) + desc.offset;
        *mapped = desc.size;
        return kSuccess;
    }
    auto key = std::make_pair(p, desc.buffer_id);
    auto it = internal_imports_.find(key);
    if (it == internal_imports_.end()) {
        std::unique_ptr<IpcMapping> mapping;
        GPUCOLL_TRY(cache_->import(device_, pids_[p], desc, &mapping));
        it = internal_imports_.emplace(key, std::move(mapping)).first;
    }
    *out = static_cast<char*>(it->second->address()) + desc.offset;
    *mapped = it->second->size();
    return kSuccess;
}

}  // namespace gpucoll::intra

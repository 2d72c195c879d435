// node_comm.h - the per-communicator context of the accelerated path on one
// node: the shared segment, the peers, persistent scratch buffers, and the
// protocol every call follows (post, agree, run an algorithm, signal).
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/wait_watch.h"
#include "core/selection_table.h"
#include "device/device.h"
#include "gpucoll.h"
#include "intra/ipc_cache.h"
#include "intra/progress_agent.h"
#include "intra/shared_segment.h"
#include "topo/model_table.h"
#include "topo/paths.h"

namespace gpucoll::inter {
class Hierarchy;
struct Verdict;
struct VerdictExchange;
}  // namespace gpucoll::inter

namespace gpucoll::intra {

struct BufferBytes;

// What must be equal on every rank for the ranks to take the same decisions
// (MCA parameters are per process: nothing else checks that they agree).
struct Settings {
    int32_t algorithm[GPUCOLL_COLL_COUNT];
    int32_t uniform_memory, device_flags, host_pipeline, inter_algorithm, inter_device_memory,
        thread_multiple, inter_bcast,
        progress_off;  // progress_thread 0: nonblocking calls between nodes are staged
    uint64_t one_shot_max_bytes, chain_min_bytes, chunk_bytes, inter_chunk_bytes,
        inter_direct_max_bytes, one_kernel_max_bytes;
    bool operator==(const Settings&) const = default;
};
Settings settings_of(const gpucoll_comm_config_t& c);

// Who is on one node: equal strings. The environment variable
// GPUCOLL_HOSTID replaces it (tests fake nodes with it, like NCCL_HOSTID);
// otherwise boot id and host name.
std::string node_identity();

// A device allocation owned through a Device; freed on destruction.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    ~DeviceBuffer() { reset(); }
    Status allocate(Device* device, size_t bytes);
    void reset();
    // Gives the allocation up without freeing it (a peer may still map it).
    void leak() {
        ptr_ = nullptr;
        size_ = 0;
    }
    void* data() const { return ptr_; }
    size_t size() const { return size_; }

private:
    Device* device_ = nullptr;
    void* ptr_ = nullptr;
    size_t size_ = 0;
};

class NodeComm;

// Everything an algorithm needs for one call.
class CallContext {
public:
    CallContext(NodeComm& comm, const gpucoll_call_t& call, uint64_t seq);

    NodeComm& comm;
    const gpucoll_call_t& call;
    const uint64_t seq;
    const int rank;
    const int size;
    Device* const device;
    const size_t elem;  // bytes per element

    // The input of rank p for reductions, allgather and bcast: its send buffer,
    // or (MPI_IN_PLACE) its receive buffer, as an address of this process.
    Status input(int p, char** out);
    Status output(int p, char** out);  // rank p's receive buffer
    Status temp(int p, char** out);    // rank p's posted temporary buffer

    // Progress signalling. step 1..kStepDone-1 inside a call; kStepDone: done
    // with every peer's memory. With device flags these are stream-ordered
    // device operations, like the copies and reductions.
    Status signal(uint64_t step);
    Status wait_peer(int peer, uint64_t step);
    Status wait_all(uint64_t step);  // one synchronisation round
    // End of the call: all device work done, kStepDone published on the host.
    Status finish();

    // Device work, accounted: bytes read from or written to peers' memory.
    // Errors of waits after a peer failed this call say so.
    Status copy(void* dst, const void* src, size_t bytes, bool crosses_peer);
    // Waits for the device work enqueued so far (before work the host drives,
    // such as transfers between nodes) and publishes its steps.
    Status drain();
    Status reduce(void* dst, const void* const* srcs, int nsrc, size_t count, size_t peer_srcs);
    // The whole call as one kernel (the one-kernel path): enqueued on the
    // communicator's stream and waited for here where the call is not
    // pipelined; an error where a peer failed the call meanwhile.
    Status one_kernel(const OneKernelAllreduce& call);

    // Room for one pointer per rank, owned by the communicator and reused by
    // every call (no allocation per call).
    const void** sources();
    char** inputs();
    ~CallContext() { pins_.clear(); }

    uint64_t bytes_peer = 0;
    uint64_t rounds = 0;

private:
    // All device work of the call is enqueued here (nullptr: synchronous).
    // Device flags: the flags too. Host flags: a step is published on the
    // host once the work enqueued before its signal has finished.
    Stream* const stream_;
    const bool device_flags_;
    Status resolve(int p, int which, char** out);
    std::vector<std::shared_ptr<IpcMapping>>& pins_;  // the communicator's, cleared per call
};

class NodeComm {
public:
    // Collective over the bootstrap. *out stays null when the accelerated
    // path cannot serve the group (several nodes, no backend, setup failed
    // somewhere): the answer is the same on every rank.
    static Status create(const gpucoll_bootstrap_t& bootstrap, const gpucoll_comm_config_t& config,
                         std::unique_ptr<NodeComm>* out);
    // Waits until no peer can still read our buffers (a one-shot peer may be
    // reading our scratch after we returned), then releases everything.
    ~NodeComm();

    // gpucoll_comm_run: GPUCOLL_SUCCESS, GPUCOLL_DECLINED or an error.
    int run(const gpucoll_call_t& call);
    // gpucoll_comm_decline: this rank posts its decline for the next call.
    int decline();
    // gpucoll_comm_settle (a barrier): the calls started before end; then
    // GPUCOLL_REBIND where one of them asked every rank to set the
    // communicator up again, else GPUCOLL_SUCCESS.
    int settle();
    // The same without lock() where nothing can be running on this
    // communicator's behalf (no call queued: the progress thread has nothing
    // to do here; one node): false otherwise, and nothing done. The
    // host-buffer path of every collective comes through here: inline, and
    // it never reads a peer's progress (a decline overwrites no post).
    // The same protocol as gpucoll_host_gate_call (gpucoll.h), on the same
    // fields.
    bool decline_unlocked(int* status) {
        if (hier_ != nullptr || __atomic_load_n(&gate_.busy, __ATOMIC_ACQUIRE) != 0) return false;
        const uint64_t seq = ++gate_.seq;
        publish_post(seq, PostKind::Decline);
        *status = segment_.load_acquire(segment_.header().abort) == seq ? failed_by_peer()
                                                                        : GPUCOLL_DECLINED;
        return true;
    }

    // Nonblocking calls (gpucoll_comm_start): one queue per communicator, in
    // issue order. A call is posted once every earlier one of this rank has
    // ended (the progress word is per rank, not per call), and run once every
    // rank's post is visible; nothing waits for a peer to arrive.
    struct Pending;
    struct Plan;
    std::shared_ptr<Pending> start(const gpucoll_call_t& call, gpucoll_form_t form);
    // Persistent calls: the setup of a call done once (make_plan, local),
    // then started like start(call, GPUCOLL_FORM_PERSISTENT) without it.
    std::shared_ptr<Plan> make_plan(const gpucoll_call_t& call);
    std::shared_ptr<Pending> start(std::shared_ptr<const Plan> plan);
    uint64_t id() const { return id_; }  // unique in the process
    // The host gate of this communicator (gpucoll_comm_host_gate): its
    // call sequence and busy word are the ones every call here
    // uses; its counts are the communicator's delegated calls.
    gpucoll_host_gate_t& host_gate() { return gate_; }
    void start_decline();
    // Advances the queue as far as it goes without waiting for a peer to
    // arrive (a call whose posts are all visible runs to its end, unless
    // post_only). True when the queue is empty. Callers hold lock().
    bool progress(bool post_only = false);

    // This process's address of a communicator-owned buffer (temp, copies)
    // that rank p posted; mapped once per communicator, unmapped at teardown.
    Status resolve_internal(int p, const BufferDesc& desc, void** out, size_t* mapped);

    // Held by every entry into this communicator (the C interface, the
    // progress agent). Recursive: a wait inside a call may advance the queue.
    std::recursive_mutex& lock() { return lock_; }

    int rank() const { return rank_; }
    int size() const { return size_; }
    int call_size() const { return call_size_; }  // ranks of the whole communicator
    // Ring algorithms: the rank at position i of the ring (modulo the size),
    // and rank r's position; rank order unless the topology says otherwise.
    int ring_at(int i) const {
        const int n = size_, p = ((i % n) + n) % n;
        return ring_.empty() ? p : ring_[static_cast<size_t>(p)];
    }
    int ring_position(int r) const {
        return ring_pos_.empty() ? r : ring_pos_[static_cast<size_t>(r)];
    }
    bool ring_family() const { return ring_family_; }
    // A communicator that spans nodes: this node's part of it. Calls then
    // agree between nodes, and the hierarchical algorithms run.
    void attach(inter::Hierarchy* hierarchy);
    inter::Hierarchy* hierarchy() const { return hier_; }
    // The whole communicator's rank of local rank p (itself on one node).
    int global_rank(int p) const { return global_of_[p]; }
    // This rank's buffers for call (the whole communicator's layout).
    BufferBytes bytes_of(const gpucoll_call_t& call, int p) const;
    Device* device() const { return device_; }
    const gpucoll_comm_config_t& config() const { return config_; }
    SharedSegment& segment() { return segment_; }
    // The GPU this communicator works on; -1: none yet (the application had
    // not chosen one: every call declines, or rebinds).
    int ordinal() const { return ordinal_; }
    IpcCache& cache() { return *cache_; }
    int pid(int p) const { return pids_[p]; }
    const Post& post_of(int p, uint64_t seq) const {
        return segment_.slot(p).posts[seq % kPostDepth];
    }
    // The error of a call a peer failed (its message for last_error()).
    static int failed_by_peer();
    // Rank p's kind for call seq, once p posted it: a kind word of another
    // call (an earlier one: p cannot post seq + kPostDepth before we are
    // past seq) means p declined seq, which writes none.
    PostKind kind_of(int p, uint64_t seq) const {
        const uint64_t word = post_of(p, seq).kind;
        return word >> 8 == seq ? static_cast<PostKind>(word & 0xff) : PostKind::Decline;
    }
    // Local rank 0's verdict word of call seq (communicators that span nodes).
    std::atomic<uint64_t>& verdict_word(uint64_t seq) const {
        return segment_.slot(0).verdicts[seq % kPostDepth];
    }

    // One-shot scratch: two slots of scratch_slot_bytes_ per rank, chosen by
    // call parity; peers' slots are mapped once at creation.
    char* scratch_slot(int p, uint64_t seq) const;
    // Rank p's device flag (first bytes of its scratch), for device-side flags.
    uint64_t* flag(int p) const;
    // Device flags for this communicator: decided at creation from the
    // configured mode and which ranks share a GPU (the same on every rank).
    bool device_flags() const { return device_flags_; }
    // The communicator's non-blocking stream; only pipelined communicators
    // have one (nullptr otherwise).
    Stream* stream() const { return stream_.get(); }
    // Device work of a call goes to stream() (device flags, or pipelined
    // host flags) rather than being issued and waited for one by one.
    bool pipelined() const { return pipelined_; }
    // Waits for the stream's work, calling the progress function meanwhile.
    // With device flags, once call seq is aborted (a peer failed it), our
    // stream's waits on peers are released by writing their flags through
    // our mappings: a peer that failed without writing its own (a sticky
    // device error) must not leave us waiting forever.
    Status wait_stream(uint64_t seq);
    // Host flags with a stream: publishes progress word once the work
    // enqueued so far has finished (a marker behind it; checked while this
    // rank waits for its peers, and at the end of the call).
    Status signal_after_stream(uint64_t word);
    // Publishes the progress of every marker reached so far.
    Status publish_reached();
    // Drops what was not published (after a failure).
    void drop_pending_signals() { pending_signals_.clear(); }
    static constexpr size_t kFlagBytes = 256;
    // Whether this allreduce can go through the one-kernel path here: the
    // communicator took it at setup (2-8 ranks, a stream, kernels of ranks
    // sharing a GPU side by side) and the call fits a slot.
    bool one_kernel_usable(const gpucoll_call_t& call, size_t elem) const;
    // The selection's choice with the one-kernel path: taken for a one-shot
    // call up to one_kernel_max_bytes where usable; a forced one_kernel that
    // is not usable falls back to what auto would run.
    gpucoll_algorithm_t with_one_kernel(const gpucoll_call_t& call, size_t elem,
                                        gpucoll_algorithm_t chosen, const char** why) const;
    // Whether kernels may wait on the flags in device memory: device flags,
    // or the one-kernel path. A failure then writes them (fail, wait_stream).
    bool kernels_wait_on_flags() const { return device_flags_ || one_kernel_ok_; }

    DeviceBuffer& temp() { return temp_; }      // posted when an algorithm needs it
    DeviceBuffer& result() { return result_; }  // local only (in-place results)

    // Waits until peer's progress reaches word. abortable: give up with an
    // error when a rank failed the call that word belongs to (waits for a
    // peer's post are never abortable: every rank posts every call).
    Status wait_progress(int peer, uint64_t word, bool abortable);
    // Every peer's progress has reached word (a post, not a step); reads a
    // peer's flag only when what we saw of it before is not enough.
    Status wait_all_seen(uint64_t word);
    // A failure after posting call seq: every rank fails that call (waiting
    // peers stop) and declines every later call, so all stay in step.
    int fail(Status s, uint64_t seq);
    bool aborted() const;
    void log(int level, const char* fmt, ...) const __attribute__((format(printf, 3, 4)));
    // Says (always) that a wait has lasted config's wait_warning_s for whom
    // (printf format: who, and the call), and what can make it endless:
    // arrival, a rank that never makes the call; else one that stopped in it
    // (common/wait_watch.h).
    void warn_waiting(bool arrival, const char* fmt, ...) const
        __attribute__((format(printf, 3, 4)));
    // What a waiting rank does every few spins: Open MPI's progress (the
    // component's function), except on a progress agent's thread, which must
    // not call it.
    void idle() const;
    // idle(), then true once watch's wait has lasted its time (never on a
    // progress thread): the caller says whom it waits for.
    bool idle(WaitWatch& watch) const;

private:
    NodeComm() = default;
    Status setup(const gpucoll_bootstrap_t& bootstrap, const gpucoll_comm_config_t& config);
    Status setup_segment(const gpucoll_bootstrap_t& bootstrap);
    Status setup_scratch(const gpucoll_bootstrap_t& bootstrap, bool segment_ok);
    void teardown();
    // What a rank prepared locally before posting a call.
    struct Prepared {
        gpucoll_call_t call;  // the user's buffers, or exportable copies of them
        BufferDesc desc[kPostedBuffers];
        bool recv_copied = false;  // results go back to the user's buffer after the call
    };
    Status prepare(const gpucoll_call_t& call, gpucoll_algorithm_t algo, uint64_t seq,
                   Prepared* out, const Plan* plan = nullptr);
    // The user's buffers checked (extent, device memory, reduction support)
    // and, where bytes.* asks, described for peers.
    Status check_on_our_device(const BufferBytes& bytes, const PointerInfo& send_info,
                               const PointerInfo& recv_info) const;
    Status check_user_buffers(const gpucoll_call_t& call, const BufferBytes& bytes,
                              PointerInfo* send_info, PointerInfo* recv_info) const;
    // Describes user for peers; memory IPC cannot export is replaced by an
    // exportable copy (copy_in: with the user's contents).
    Status describe_or_copy(const void* user, const PointerInfo& info, size_t bytes, bool copy_in,
                            DeviceBuffer& copy, BufferDesc* desc, const void** used);
    Status describe_internal(const DeviceBuffer& buffer, BufferDesc* desc);
    // One call from its post to its end (run() = begin + conclude).
    void begin(Pending& op);
    int conclude(Pending& op);
    int decline_now(bool may_wait = true);
    // The post of call seq visible to the peers: its kind word (written
    // after whatever else the post carries; a decline writes none), then
    // this rank's progress word.
    void publish_post(uint64_t seq, PostKind kind) {
        if (kind != PostKind::Decline)
            segment_.slot(rank_).posts[seq % kPostDepth].kind = kind_word(seq, kind);
        segment_.store_release(segment_.slot(rank_).progress, progress_word(seq, 0));
    }
    void enqueued();
    // Decided once at creation (environment and machine queries).
    ProgressAgent::Mode choose_agent_mode() const;
    // The spin budget of waits (spin_pauses_), decided once at creation.
    unsigned spin_pauses_for() const;
    // Ends every queued call (blocking calls come after them); unless_aborted:
    // gives up once a rank failed a call (teardown).
    void drain(bool unless_aborted = false);
    bool can_post(uint64_t seq) const;
    // Whether a post (a decline, or another kind) waits for the post window:
    // all but declines on one node, which overwrite nothing (post()).
    bool windowed(bool decline) const { return !decline || hier_ != nullptr; }
    bool peers_posted(uint64_t seq) const;
    // Grows buffer to at least bytes. The old allocation is kept until
    // teardown: peers may still have it mapped.
    Status grow(DeviceBuffer& buffer, size_t bytes);
    void post(uint64_t seq, PostKind kind, const Prepared* prepared, const CallSignature* sig);
    // This node's answer on call seq from every local post (after the
    // agreement round), and (several nodes) every node's, combined.
    inter::Verdict local_verdict(uint64_t seq, const CallSignature& sig) const;
    Status global_verdict(uint64_t seq, inter::Verdict* v);
    // A rank that declines call seq on a communicator that spans nodes: its
    // verdict goes to the other nodes, and it returns without waiting for
    // theirs (its decline decides the call; a host-buffer call must not wait
    // for a round trip between nodes).
    // may_wait: false from a call's start (nonblocking), which must not wait.
    int decline_between_nodes(uint64_t seq, bool may_wait = true);
    // Starts the exchange of this rank's decline of call seq and keeps it
    // until the other members' verdicts have arrived (advance_background).
    Status send_decline(uint64_t seq, bool may_wait);
    // Tests the declines' exchanges in flight: once each (Sweep::Once: from
    // a call's start or the queue's progress, which must not wait for another
    // node), until at most kBackgroundMax are left (Sweep::Bound: a blocking
    // decline of a rank far ahead), or until none is (Sweep::All: teardown).
    enum class Sweep { Once, Bound, All };
    void advance_background(Sweep how);
    static constexpr size_t kBackgroundMax = 64;
    // A call in flight on a communicator that spans nodes: its verdict
    // exchange, started once this node's verdict is known and advanced
    // without waiting (a rank in MPI_Test must not wait for a node that has
    // not started the call). *ready once every node's verdict is in.
    Status advance_verdict(Pending& op, bool* ready);

    int rank_ = 0;
    int size_ = 0;
    inter::Hierarchy* hier_ = nullptr;
    int call_size_ = 0;           // ranks of the whole communicator
    std::vector<int> global_of_;  // local rank -> rank of the whole communicator
    Device* device_ = nullptr;
    // The GPU current when the communicator was created: its scratch,
    // stream and mappings live there, and every entry (the application's
    // threads, the progress agent) works on it. -1: unknown.
    int ordinal_ = -1;
    // The GPU of the buffers that made this rank answer GPUCOLL_REBIND last
    // (-1: none); written by the thread that checked them.
    mutable std::atomic<int> rebind_device_{-1};
    bool warned_other_device_ = false;
    // A nonblocking or persistent call found buffers on another GPU on some
    // rank (verdict kRebind, the same on every rank): the next blocking
    // call, host or device, or barrier (settle) answers GPUCOLL_REBIND on
    // every rank, after the calls started before it ended. Written under
    // lock() before queued_'s release, read by decline_unlocked.
    std::atomic<bool> rebind_pending_{false};
    int pending_rebind_device_ = -1;  // this rank's buffers' GPU then (-1: ours were fine)
    // GPUCOLL_REBIND (and the GPU to set up on, for this thread) where a
    // rebind is pending, else kSuccess.
    Status take_pending_rebind();
    IpcCache* cache_ = nullptr;
    gpucoll_comm_config_t config_{};
    SharedSegment segment_;
    std::vector<int> pids_;
    bool ready_ = false;  // setup succeeded on every rank
    // The call sequence (gate_.seq) and the busy word (update_busy), with
    // the pointers a host call needs, on one cache line; then the delegated
    // counts.
    alignas(64) gpucoll_host_gate_t gate_{};
    // gate_.busy from queued_ and rebind_pending_: under lock(), after
    // either changed. Release: what ending a call wrote (the sequence, the
    // segment) is visible to a host call that reads busy 0.
    // Its pointers, once the segment is mapped (last_call:
    // the core's, gpucoll_comm_host_gate).
    void init_gate();
    void update_busy() {
        const bool busy = queued_.load(std::memory_order_relaxed) != 0 ||
                          rebind_pending_.load(std::memory_order_relaxed);
        __atomic_store_n(&gate_.busy, busy ? 1u : 0u, __ATOMIC_RELEASE);
    }
    std::vector<uint64_t> peer_seen_;  // progress words last read from each peer
    uint64_t min_seen_ = 0;            // the least of them (wait_all_seen's shortcut)
    // How many times a waiting rank spins (pause) before it yields its core:
    // 0 where the job has more processes on this machine than it has cores
    // (spin_pauses_for), since the peer waited for is then most likely not
    // running and spinning only delays it.
    unsigned spin_pauses_ = kSpinPauses;
    static constexpr unsigned kSpinPauses = 128;
    // One step of a wait: pause while spinning, else yield (and every 16th
    // time the job's progress function). True when watch's wait has lasted
    // its time (the caller says whom it waits for).
    bool pause_or_yield(unsigned spins, WaitWatch& watch) const {
        if (spins < spin_pauses_) {
            __builtin_ia32_pause();
            return false;
        }
        // The job's progress every 16th yield, not at the first: Open MPI's
        // progress yields too where it was told to (mpi_yield_when_idle,
        // oversubscribed), and two yields in a row switch twice for nothing.
        const bool due = (spins - spin_pauses_) % 16 == 15 && idle(watch);
        sched_yield();
        return due;
    }
    // Scratch of CallContext, one entry per rank, reused call after call.
    friend class CallContext;
    std::vector<const void*> sources_;
    std::vector<char*> inputs_;
    std::vector<std::shared_ptr<IpcMapping>> pins_;
    uint64_t last_accelerated_ = 0;  // seq of the last call we ran on the accelerated path
    // Between nodes: exchanges of this rank's declines still receiving the
    // other members' verdicts (by call).
    std::deque<std::pair<uint64_t, std::shared_ptr<inter::VerdictExchange>>> background_;
    // Ended ones, reused by the next declines (no allocation per host call).
    std::vector<std::shared_ptr<inter::VerdictExchange>> spare_exchanges_;
    std::deque<std::shared_ptr<Pending>> queue_;
    // Calls in queue_ (or being ended), for decline_unlocked: changed under
    // lock(), read without it.
    std::atomic<size_t> queued_{0};
    // Inside progress() or a blocking call (Busy): waits must not re-enter
    // progress(), and nonblocking calls started meanwhile stay queued.
    bool advancing_ = false;
    class Busy {
    public:
        explicit Busy(NodeComm* comm);
        ~Busy();
        Busy(const Busy&) = delete;
        Busy& operator=(const Busy&) = delete;

    private:
        NodeComm* comm_;
        bool was_;
    };
    // After a blocking call: post what was started inside its waits.
    void post_deferred();
    ProgressAgent::Mode agent_mode_ = ProgressAgent::Mode::Off;
    std::recursive_mutex lock_;
    bool poisoned_ = false;

    size_t scratch_slot_bytes_ = 0;
    DeviceBuffer scratch_;
    std::vector<char*> peer_scratch_;
    std::vector<std::unique_ptr<IpcMapping>> scratch_mappings_;
    DeviceBuffer temp_;
    DeviceBuffer result_;
    // Exportable copies of user buffers that IPC cannot export (pool memory).
    DeviceBuffer copy_send_;
    DeviceBuffer copy_recv_;
    std::vector<DeviceBuffer> retired_;  // outgrown buffers peers may still map
    // Peers' internal buffers mapped by this rank, by (rank, buffer id).
    std::map<std::pair<int, uint64_t>, std::unique_ptr<IpcMapping>> internal_imports_;
    // Device flags only. Declared last: destroyed first, before the buffers
    // and mappings its queued work may use.
    std::unique_ptr<Stream> stream_;
    std::deque<std::pair<uint64_t, uint64_t>> pending_signals_;  // (marker ticket, progress word)
    bool device_flags_ = false;
    bool gpu_shared_ = false;
    bool pipelined_ = false;
    bool one_kernel_wanted_ = false;  // configured, and the ranks' GPUs allow it
    bool one_kernel_ok_ = false;      // ... and the stream it runs on exists
    // From the topology (node_layout.h): the ranks in ring order, each
    // rank's position in it, and whether the links call for ring algorithms.
    std::vector<int> ring_, ring_pos_;
    bool ring_family_ = false;
    topo::ModelTable model_table_;  // the cost model's picks (empty: size thresholds)
    SelectionRules measured_;       // the measured table's rules (empty: none)
    void use_layout(const topo::Layout& layout, const topo::Machine* machine);

    uint64_t id_ = 0;

public:
    // A persistent call's setup, done once (make_plan).
    struct Plan {
        gpucoll_call_t call{};
        std::vector<size_t> counts;  // reduce_scatter's, owned
        uint64_t comm_id = 0;        // the NodeComm it was made for
        gpucoll_algorithm_t algo = GPUCOLL_ALGO_AUTO;
        const char* why = "";
        // The user's buffers checked and described for peers once; false:
        // each start prepares them (copies of unexportable memory, errors).
        bool described = false;
        BufferDesc send{}, recv{};
    };

    struct Pending {
        gpucoll_call_t call{};
        std::vector<size_t> counts;        // the caller's counts, kept for the call's life
        std::shared_ptr<const Plan> plan;  // persistent calls made with a plan
        gpucoll_form_t form = GPUCOLL_FORM_BLOCKING;
        bool decline_only = false;
        bool queued = false;  // started (nonblocking, persistent): begin() must not wait
        bool begun = false;   // posted
        bool done = false;
        // Published once status and error are final: read without the lock.
        std::atomic<bool> finished{false};
        int status = GPUCOLL_SUCCESS;
        std::string error;  // the message of a failed call
        uint64_t seq = 0;
        gpucoll_algorithm_t algo = GPUCOLL_ALGO_AUTO;
        const char* why = "";
        Prepared prepared;
        PostKind kind = PostKind::Decline;
        std::string refusal;
        int rebind_device = -1;  // Rebind posted: this rank's buffers' GPU
        CallSignature sig{};
        // Between nodes: the verdict exchange of a queued call.
        std::shared_ptr<inter::VerdictExchange> verdict;
    };
};

}  // namespace gpucoll::intra

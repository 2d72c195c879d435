// group.h - ranks on different nodes that talk over the transport: a rail
// (the ranks of one local rank, one per node) or the node leaders. A group
// moves device buffers between its members, straight through the transport
// where it handles the memory (cuda memory and a CUDA-aware UCX), else
// through a persistent pinned pool in chunks, so that the device-to-host
// copy of one chunk overlaps the network transfer of the previous ones and
// the reduction of what has arrived.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/staging.h"
#include "device/device.h"
#include "inter/transport.h"

namespace gpucoll::inter {

// One direction of a transfer: a member and a contiguous buffer. Host
// buffers (small control data) always go straight to the transport.
struct SendOp {
    int peer;
    const void* buf;
    size_t bytes;
    bool host = false;
};
struct RecvOp {
    int peer;
    void* buf;
    size_t bytes;
    bool reduce = false;  // buf = buf op received (elements of the call's type)
    bool host = false;
};

struct GroupConfig {
    size_t chunk_bytes = size_t{1} << 20;  // pipeline chunk of the staged path
    int slots = 4;                         // chunks in flight per direction
    int bcast = 0;                         // group_bcast: 0 auto, 1 tree, 2 chain (bcast_plan.h)
    void (*progress)() = nullptr;          // the job's progress (opal_progress)
    // Sleep on the network's event fd when idle instead of spinning: more
    // ranks than cores on the node (a spinning rank would take the core from
    // one that works); otherwise spinning keeps the latency low.
    bool sleep_when_idle = false;
    // A transfer that waits this long for a member says so, once, through
    // log (common/wait_watch.h); 0: never. member_ranks: each member's rank
    // in the communicator, for that message.
    double wait_warning_s = 0;
    // A transfer that receives or sends nothing for this long fails
    // (gpucoll_comm_config_t.peer_timeout_s); 0: never. Not the hello (its
    // own timeout), not post_host_exchange's requests (tested by the caller).
    double peer_timeout_s = 0;
    bool uniform_memory = false;
    void (*log)(int level, const char* message) = nullptr;
    std::vector<int> member_ranks;
    std::vector<std::string> member_hosts;  // each member's host, for messages ("": unknown)
};

class Group {
public:
    // members: an endpoint per member (nullptr for me); me: my index.
    // node_abort: the word a failed node-mate sets to the call it failed.
    Group(Transport* transport, Device* device, std::vector<Endpoint*> members, int me,
          uint32_t comm_id, const GroupConfig& config, const std::atomic<uint64_t>* node_abort);
    ~Group();
    Group(const Group&) = delete;
    Group& operator=(const Group&) = delete;

    // Posts the receive for abort messages; the group starts staged.
    Status start();
    // Device memory straight to the transport (true) or through the pinned
    // chunks (false); the same on every member. The chunks are allocated
    // only if reserve_now (a process on no GPU yet has none, and needs none).
    Status set_direct(bool direct, bool reserve_now);
    // Whether every member's endpoint can carry device memory itself.
    bool device_capable(std::string* names);

    int size() const { return static_cast<int>(members_.size()); }
    size_t chunk_bytes() const { return config_.chunk_bytes; }
    int slots() const { return config_.slots; }
    int bcast_mode() const { return config_.bcast; }
    int me() const { return me_; }
    // Device memory goes straight to the transport (no staging).
    bool direct() const { return direct_; }

    // Moves every send and receive of one step of call seq. Several
    // operations with one peer are matched in the order they are listed
    // (both sides list them in the same order). gpucoll_dtype_t / op: the reduction
    // of receives that reduce. Fails (and cancels what is pending) when a
    // member or a node-mate failed this call.
    // timeout_s > 0: give up (an error) after that long (the creation-time
    // hello: a peer that cannot be reached must not hang the job).
    Status transfer(uint64_t seq, uint32_t step, const std::vector<SendOp>& sends,
                    const std::vector<RecvOp>& recvs, gpucoll_dtype_t dtype, gpucoll_op_t op,
                    double timeout_s = 0);
    // Small host data: mine (bytes) to every member, theirs into
    // all[member * bytes] (all[me] untouched). mine is copied first: a send
    // abandoned by a failed exchange may read it after the caller's frame.
    Status exchange_host(uint64_t seq, uint32_t step, const void* mine, size_t bytes, void* all,
                         double timeout_s = 0);
    // The nonblocking form of exchange_host, for calls in flight: posts the
    // receives and sends into *reqs (kept by the caller, with mine and all,
    // until test_requests says done or cancel_requests ends them): member
    // p's receive at 2p, its send at 2p + 1.
    Status post_host_exchange(uint64_t seq, uint32_t step, const void* mine, size_t bytes,
                              void* all, std::vector<Request>* reqs);
    // Without waiting: *done once every request of reqs finished. Fails
    // when a member or a node-mate failed call seq.
    Status test_requests(uint64_t seq, std::vector<Request>* reqs, bool* done);
    void cancel_requests(std::vector<Request>* reqs);
    // Tells every member that this rank failed call seq (best effort).
    void abort(uint64_t seq);

    Device* device() const { return device_; }
    uint64_t bytes_sent = 0;  // over the transport, accumulated per call by the caller

    // Device memory of at least bytes, kept between calls (direct allreduce).
    Status scratch(size_t bytes, char** out);

private:
    Status check_abort(uint64_t seq);
    // The once-per-wait message of a transfer that has waited
    // config_.wait_warning_s for member peer (never on a progress thread:
    // config_.log may be Open MPI's output).
    void warn_waiting(uint64_t seq, int peer, bool receiving) const;
    // The error of a call whose member peer is lost, and why.
    Status unreachable(uint64_t seq, int peer, const char* why) const;

    // One send or receive chunk in flight (a slot of the pinned pool).
    struct Slot {
        Request req;
        bool busy = false;
        size_t op = 0, off = 0, len = 0;
    };

    Transport* transport_;
    Device* device_;
    std::vector<Endpoint*> members_;
    int me_;
    uint32_t comm_id_;
    GroupConfig config_;
    const std::atomic<uint64_t>* node_abort_;
    bool direct_;
    // Staged path: pinned chunks, slots per direction.
    Status reserve_stages();
    PinnedBuffer send_stage_, recv_stage_;
    // Control: abort notices of members.
    uint64_t control_in_ = 0;
    Request control_recv_;
    // The calls members told us they failed (the latest kAbortsKept: one
    // notice must not hide another's, whatever order they arrive in).
    static constexpr size_t kAbortsKept = 8;
    std::array<uint64_t, kAbortsKept> aborted_{};
    size_t aborts_seen_ = 0;
    std::vector<uint64_t> control_out_;
    std::vector<Request> control_sends_;
    void* scratch_ = nullptr;
    size_t scratch_bytes_ = 0;
    void* reduce_chunks_ = nullptr;  // direct mode: slots chunks of device memory, kept
    // Reused by every transfer and small exchange (no allocation per call).
    std::vector<Slot> send_slots_, recv_slots_;
    std::vector<SendOp> host_sends_;
    std::vector<RecvOp> host_recvs_;
    // exchange_host's copy of this member's part (kept from call to call).
    std::unique_ptr<uint8_t[]> host_mine_;
    size_t host_mine_bytes_ = 0;
    // The last transfer abandoned a send (it failed with a send in flight):
    // UCX may still read that send's buffer. stage: any transfer abandoned
    // a send from the pinned stage.
    bool last_abandoned_ = false, stage_abandoned_ = false;
    // A transfer abandoned a receive into the pinned stage or the reduce
    // chunks (its sender lost mid-message): UCX may still write there.
    bool recv_abandoned_ = false;
};

}  // namespace gpucoll::inter

#include "inter/group.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/wait_watch.h"
#include "device/reduce_ops.h"
#include "inter/bcast_plan.h"
#include "intra/progress_agent.h"

namespace gpucoll::inter {

Group::Group(Transport* transport, Device* device, std::vector<Endpoint*> members, int me,
             uint32_t comm_id, const GroupConfig& config, const std::atomic<uint64_t>* node_abort)
    : transport_(transport),
      device_(device),
      members_(std::move(members)),
      me_(me),
      comm_id_(comm_id),
      config_(config),
      node_abort_(node_abort),
      direct_(false) {
    config_.slots = std::max(config_.slots, 2);
    config_.chunk_bytes = group_chunk_bytes(config_.chunk_bytes);
}

Group::~Group() {
    transport_->cancel(&control_recv_);
    for (Request& r : control_sends_) transport_->cancel(&r);
    // A staged send abandoned by a failed transfer may still read the pinned
    // stage it was sent from: kept, not freed.
    if (stage_abandoned_) send_stage_.leak();
    if (recv_abandoned_) {
        recv_stage_.leak();
        reduce_chunks_ = nullptr;  // leaked as well
    }
    if (scratch_ != nullptr) device_->free(scratch_);
    if (reduce_chunks_ != nullptr) device_->free(reduce_chunks_);
}

Status Group::scratch(size_t bytes, char** out) {
    if (scratch_ == nullptr || scratch_bytes_ < bytes) {
        if (scratch_ != nullptr) device_->free(scratch_);
        scratch_ = nullptr;
        scratch_bytes_ = 0;
        GPUCOLL_TRY(device_->alloc(&scratch_, bytes));
        scratch_bytes_ = bytes;
    }
    *out = static_cast<char*>(scratch_);
    return kSuccess;
}

Status Group::start() {
    control_out_.assign(members_.size(), 0);
    control_sends_.resize(members_.size());
    GPUCOLL_TRY(set_direct(false, false));
    return transport_->recv(make_tag(comm_id_, 0, kControlStep, 0), kTagMatchControl, &control_in_,
                            sizeof control_in_, MemKind::Host, &control_recv_);
}

Status Group::set_direct(bool direct, bool reserve_now) {
    direct_ = direct;
    if (direct) {
        send_stage_.reset();
        recv_stage_.reset();
        return kSuccess;
    }
    return reserve_now ? reserve_stages() : kSuccess;
}

Status Group::reserve_stages() {
    GPUCOLL_TRY(send_stage_.reserve(device_, config_.chunk_bytes * config_.slots));
    return recv_stage_.reserve(device_, config_.chunk_bytes * config_.slots);
}

bool Group::device_capable(std::string* names) {
    bool capable = true;
    for (Endpoint* ep : members_)
        if (ep != nullptr) capable = transport_->device_capable(ep, names) && capable;
    return capable;
}

Status Group::exchange_host(uint64_t seq, uint32_t step, const void* mine, size_t bytes, void* all,
                            double timeout_s) {
    if (host_mine_ == nullptr || host_mine_bytes_ < bytes) {
        host_mine_ = std::make_unique<uint8_t[]>(bytes);
        host_mine_bytes_ = bytes;
    }
    std::memcpy(host_mine_.get(), mine, bytes);
    host_sends_.clear();
    host_recvs_.clear();
    for (int p = 0; p < size(); ++p) {
        if (p == me_) continue;
        host_sends_.push_back({p, host_mine_.get(), bytes, true});
        host_recvs_.push_back(
            {p, static_cast<char*>(all) + static_cast<size_t>(p) * bytes, bytes, false, true});
    }
    const Status s =
        transfer(seq, step, host_sends_, host_recvs_, GPUCOLL_BYTE, GPUCOLL_OP_BOR, timeout_s);
    if (last_abandoned_) {  // UCX may still read it: kept for good, a new one next time
        (void)host_mine_.release();
        host_mine_bytes_ = 0;
    }
    return s;
}

Status Group::post_host_exchange(uint64_t seq, uint32_t step, const void* mine, size_t bytes,
                                 void* all, std::vector<Request>* reqs) {
    reqs->assign(2 * members_.size(), Request{});
    for (int p = 0; p < size(); ++p) {  // receives first, so that sends find them
        if (p == me_) continue;
        Status s = transport_->recv(make_tag(comm_id_, seq, step, static_cast<uint32_t>(p)),
                                    kTagMatchAll, static_cast<char*>(all) + p * bytes, bytes,
                                    MemKind::Host, &(*reqs)[2 * p]);
        if (s != kSuccess) {
            cancel_requests(reqs);
            return s;
        }
    }
    for (int p = 0; p < size(); ++p) {
        if (p == me_) continue;
        Status s = transport_->send(members_[p], make_tag(comm_id_, seq, step, me_), mine, bytes,
                                    MemKind::Host, &(*reqs)[2 * p + 1]);
        if (s != kSuccess) {
            cancel_requests(reqs);
            return s;
        }
    }
    return kSuccess;
}

Status Group::test_requests(uint64_t seq, std::vector<Request>* reqs, bool* done) {
    *done = false;
    transport_->progress();
    bool all = true;
    for (Request& r : *reqs) {
        bool finished = false;
        Status s = transport_->test(&r, &finished);
        if (s != kSuccess) {
            cancel_requests(reqs);
            return s;
        }
        all = all && finished;
    }
    if (all) {
        *done = true;
        return kSuccess;
    }
    Status s = check_abort(seq);
    if (s != kSuccess) cancel_requests(reqs);
    return s;
}

void Group::cancel_requests(std::vector<Request>* reqs) {
    for (Request& r : *reqs) transport_->cancel(&r);
}

Status Group::check_abort(uint64_t seq) {
    bool done = false;
    if (transport_->test(&control_recv_, &done) == kSuccess && done) {
        aborted_[aborts_seen_++ % kAbortsKept] = control_in_;
        GPUCOLL_TRY(transport_->recv(make_tag(comm_id_, 0, kControlStep, 0), kTagMatchControl,
                                     &control_in_, sizeof control_in_, MemKind::Host,
                                     &control_recv_));
    }
    if (seq == 0) return kSuccess;  // setup: nothing to abort yet
    if (std::find(aborted_.begin(), aborted_.end(), seq) != aborted_.end())
        return set_error(GPUCOLL_ERR_INTERNAL,
                         "a rank on another node failed during this gpucoll collective; see its "
                         "error output");
    if (node_abort_ != nullptr && node_abort_->load(std::memory_order_acquire) == seq)
        return set_error(GPUCOLL_ERR_INTERNAL,
                         "a peer failed during this gpucoll collective; see its error output");
    return kSuccess;
}

void Group::warn_waiting(uint64_t seq, int peer, bool receiving) const {
    auto rank_of = [this](int member) {
        return member >= 0 && static_cast<size_t>(member) < config_.member_ranks.size()
                   ? config_.member_ranks[static_cast<size_t>(member)]
                   : -1;
    };
    char whom[160];
    std::snprintf(whom, sizeof whom, "rank %d on another node (%s of call %llu)", rank_of(peer),
                  receiving ? "its data or its node's verdict" : "to take this rank's data",
                  static_cast<unsigned long long>(seq));
    // A rank that does not receive what we send is in the call (it answered
    // the verdict) or never came (only its node's verdict can tell).
    const std::string text =
        wait_warning_text(config_.wait_warning_s, whom, true, config_.uniform_memory);
    if (config_.log != nullptr) {
        config_.log(0, text.c_str());
    } else {
        std::fprintf(stderr, "gpucoll[%d]: %s\n", rank_of(me_), text.c_str());
    }
}

Status Group::unreachable(uint64_t seq, int peer, const char* why) const {
    const size_t m = static_cast<size_t>(peer);
    const int rank = peer >= 0 && m < config_.member_ranks.size() ? config_.member_ranks[m] : -1;
    const std::string host =
        peer >= 0 && m < config_.member_hosts.size() ? config_.member_hosts[m] : std::string();
    return set_error(GPUCOLL_ERR_SYSTEM,
                     "rank %d on host %s is unreachable: %s; call %llu fails on every rank that "
                     "waits on it (its link or node down, or the process stopped)",
                     rank, host.empty() ? "?" : host.c_str(), why,
                     static_cast<unsigned long long>(seq));
}

void Group::abort(uint64_t seq) {
    for (int p = 0; p < size(); ++p) {
        if (p == me_) continue;
        transport_->cancel(&control_sends_[p]);  // an older notice, if still pending
        control_out_[p] = seq;
        (void)transport_->send(members_[p], make_tag(comm_id_, seq, kControlStep, me_),
                               &control_out_[p], sizeof(uint64_t), MemKind::Host,
                               &control_sends_[p]);
    }
    transport_->progress();
}

Status Group::transfer(uint64_t seq, uint32_t step, const std::vector<SendOp>& sends,
                       const std::vector<RecvOp>& recvs, gpucoll_dtype_t dtype, gpucoll_op_t op,
                       double timeout_s) {
    const auto start = std::chrono::steady_clock::now();
    const size_t elem = std::max<size_t>(reduce::dtype_size(dtype), 1);
    const size_t chunk = std::max<size_t>(config_.chunk_bytes / elem, 1) * elem;
    const int slots = config_.slots;
    const MemKind device_kind = direct_ ? MemKind::Cuda : MemKind::Host;
    char* reduce_chunks = nullptr;  // direct receives that reduce land here first
    bool any_direct_reduce = false;
    for (const RecvOp& r : recvs) any_direct_reduce |= direct_ && r.reduce && !r.host;
    if (any_direct_reduce) {
        if (reduce_chunks_ == nullptr)
            GPUCOLL_TRY(device_->alloc(&reduce_chunks_, config_.chunk_bytes * slots));
        reduce_chunks = static_cast<char*>(reduce_chunks_);
    }
    // Staged device memory needs the pinned chunks, which a process on no
    // GPU yet does not have (pinned memory needs a GPU context); such a
    // process never moves device memory (it declines or rebinds every call).
    bool any_staged = false;
    for (const SendOp& so : sends) any_staged |= !direct_ && !so.host && so.bytes != 0;
    for (const RecvOp& r : recvs) any_staged |= !direct_ && !r.host && r.bytes != 0;
    if (any_staged && (send_stage_.data() == nullptr || recv_stage_.data() == nullptr))
        return set_error(GPUCOLL_ERR_INTERNAL,
                         "device memory between nodes on a communicator set up on no GPU");

    std::vector<Slot>& send_slots = send_slots_;  // reused: no allocation after the first call
    std::vector<Slot>& recv_slots = recv_slots_;
    send_slots.assign(static_cast<size_t>(slots), Slot{});
    recv_slots.assign(static_cast<size_t>(slots), Slot{});
    size_t send_op = 0, send_off = 0, recv_op = 0, recv_off = 0;
    size_t sends_left = 0, recvs_left = 0;
    for (const SendOp& s : sends) sends_left += s.host ? 1 : (s.bytes + chunk - 1) / chunk;
    for (const RecvOp& r : recvs) recvs_left += r.host ? 1 : (r.bytes + chunk - 1) / chunk;

    last_abandoned_ = false;
    auto cleanup = [&](Status s) {
        for (Slot& sl : recv_slots) {
            transport_->cancel(&sl.req);
            // A receive whose sender was lost mid-message: UCX may still
            // write into the pinned stage or the reduce chunks (kept for
            // good; the communicator stages from now on).
            if (sl.req.abandoned && !recvs[sl.op].host) recv_abandoned_ = true;
        }
        for (Slot& sl : send_slots) {
            transport_->cancel(&sl.req);
            if (!sl.req.abandoned) continue;
            last_abandoned_ = true;
            // From the stage unless a host send (exchange_host's copy) or
            // direct (the caller's device memory).
            stage_abandoned_ = stage_abandoned_ || (!sends[sl.op].host && !direct_);
        }
        return s;
    };
    // Zero-byte operations carry nothing: skip them on both sides.
    auto skip_empty = [](auto& ops, size_t& at) {
        while (at < ops.size() && ops[at].bytes == 0 && !ops[at].host) ++at;
    };
    unsigned idle = 0;  // passes without completions in a row
    // The member this transfer waits on: a receive still waited for, else a
    // send's member (-1: none).
    auto awaited = [&](bool* receiving) {
        *receiving = true;
        for (const Slot& sl : recv_slots)
            if (sl.busy) return recvs[sl.op].peer;
        *receiving = false;
        for (const Slot& sl : send_slots)
            if (sl.busy) return sends[sl.op].peer;
        return -1;
    };
    // A member whose endpoint UCX reported failed: its receives would wait
    // for ever (they match by tag on the worker, not on its endpoint).
    auto lost_member = [&]() {
        for (const Slot& sl : recv_slots)
            if (sl.busy && transport_->failed(members_[recvs[sl.op].peer]))
                return recvs[sl.op].peer;
        for (const Slot& sl : send_slots)
            if (sl.busy && transport_->failed(members_[sends[sl.op].peer]))
                return sends[sl.op].peer;
        return -1;
    };
    // Every wait but the hello's (its own timeout_s): a member that sends
    // nothing for peer_timeout_s is lost. At a verdict it may only be late
    // to enter the call: gpucoll cannot tell (a verdict sent into a cut link
    // stays unacknowledged, so TCP's keepalive never speaks), and takes it
    // for lost too, as any bound would.
    const double peer_timeout_s = timeout_s > 0 ? 0 : config_.peer_timeout_s;
    auto last_news = start;
    // Not the hello (its own timeout), not on a progress thread (waits of
    // nonblocking calls: a peer computing before its next call is normal).
    WaitWatch watch(
        timeout_s > 0 || intra::ProgressAgent::on_agent_thread() ? 0 : config_.wait_warning_s);
    for (unsigned spins = 0; sends_left + recvs_left > 0; ++spins) {
        // Start what free slots allow: receives first, so that sends find them.
        for (int i = 0; i < slots; ++i) {
            skip_empty(recvs, recv_op);
            if (recv_slots[i].busy || recv_op >= recvs.size()) continue;
            const RecvOp& r = recvs[recv_op];
            const size_t len = r.host ? r.bytes : std::min(chunk, r.bytes - recv_off);
            void* where = nullptr;
            MemKind kind = MemKind::Host;
            if (r.host) {
                where = r.buf;
            } else if (!direct_) {
                where = static_cast<char*>(recv_stage_.data()) + static_cast<size_t>(i) * chunk;
            } else if (r.reduce) {
                where = reduce_chunks + static_cast<size_t>(i) * chunk;
                kind = device_kind;
            } else {
                where = static_cast<char*>(r.buf) + recv_off;
                kind = device_kind;
            }
            Status s =
                transport_->recv(make_tag(comm_id_, seq, step, static_cast<uint32_t>(r.peer)),
                                 kTagMatchAll, where, len, kind, &recv_slots[i].req);
            if (s != kSuccess) return cleanup(s);
            recv_slots[i] = Slot{recv_slots[i].req, true, recv_op, recv_off, len};
            recv_off += len;
            if (r.host || recv_off >= r.bytes) ++recv_op, recv_off = 0;
        }
        for (int i = 0; i < slots; ++i) {
            skip_empty(sends, send_op);
            if (send_slots[i].busy || send_op >= sends.size()) continue;
            const SendOp& so = sends[send_op];
            const size_t len = so.host ? so.bytes : std::min(chunk, so.bytes - send_off);
            const void* from = static_cast<const char*>(so.buf) + send_off;
            MemKind kind = so.host ? MemKind::Host : device_kind;
            if (!so.host && !direct_) {  // stage the chunk in pinned memory
                char* stage =
                    static_cast<char*>(send_stage_.data()) + static_cast<size_t>(i) * chunk;
                Status s = device_->memcpy(stage, from, len, nullptr);
                if (s != kSuccess) return cleanup(s);
                from = stage;
            }
            Status s = transport_->send(members_[so.peer], make_tag(comm_id_, seq, step, me_), from,
                                        len, kind, &send_slots[i].req);
            if (s != kSuccess) return cleanup(s);
            if (!so.host) bytes_sent += len;
            send_slots[i] = Slot{send_slots[i].req, true, send_op, send_off, len};
            send_off += len;
            if (so.host || send_off >= so.bytes) ++send_op, send_off = 0;
        }
        transport_->progress();
        // Finish what completed: a received chunk is reduced or copied to
        // its place, and its slot taken by the next one.
        bool any = false;
        for (int i = 0; i < slots; ++i) {
            Slot& sl = send_slots[i];
            if (!sl.busy) continue;
            bool done = false;
            Status s = transport_->test(&sl.req, &done);
            if (s != kSuccess) return cleanup(s);
            if (done) sl.busy = false, --sends_left, any = true;
        }
        for (int i = 0; i < slots; ++i) {
            Slot& sl = recv_slots[i];
            if (!sl.busy) continue;
            bool done = false;
            Status s = transport_->test(&sl.req, &done);
            if (s != kSuccess) return cleanup(s);
            if (!done) continue;
            const RecvOp& r = recvs[sl.op];
            if (!r.host) {
                char* dst = static_cast<char*>(r.buf) + sl.off;
                const char* got = direct_ ? reduce_chunks + static_cast<size_t>(i) * chunk
                                          : static_cast<const char*>(recv_stage_.data()) +
                                                static_cast<size_t>(i) * chunk;
                if (r.reduce) {
                    const void* srcs[2] = {dst, got};
                    s = device_->reduce(dst, srcs, 2, sl.len / elem, dtype, op, nullptr);
                } else if (!direct_) {
                    s = device_->memcpy(dst, got, sl.len, nullptr);
                }
                if (s != kSuccess) return cleanup(s);
            }
            sl.busy = false, --recvs_left, any = true;
        }
        if (any) {
            idle = 0, watch.reset();
            if (peer_timeout_s > 0) last_news = std::chrono::steady_clock::now();
        }
        if (!any) {
            Status s = check_abort(seq);
            if (s != kSuccess) return cleanup(s);
            if (spins % 16 == 8) {
                const int lost = lost_member();
                if (lost >= 0)
                    return cleanup(unreachable(seq, lost, "UCX reports its connection failed"));
            }
            if (spins % 16 == 8 && watch.due()) {
                bool receiving = false;
                const int peer = awaited(&receiving);
                warn_waiting(seq, peer, receiving);
            }
            if (peer_timeout_s > 0 && spins % 256 == 128 &&
                std::chrono::duration<double>(std::chrono::steady_clock::now() - last_news)
                        .count() > peer_timeout_s) {
                bool receiving = false;
                const int peer = awaited(&receiving);
                char why[200];
                if (step == kVerdictStep)
                    std::snprintf(why, sizeof why,
                                  "it did not enter the call within %.0f s of this rank "
                                  "(coll_gpucoll_peer_timeout)",
                                  peer_timeout_s);
                else
                    std::snprintf(why, sizeof why,
                                  "nothing %s it for %.0f s while it is in the call "
                                  "(coll_gpucoll_peer_timeout)",
                                  receiving ? "came from" : "went to", peer_timeout_s);
                return cleanup(unreachable(seq, peer, why));
            }
            if (timeout_s > 0 && spins % 256 == 255 &&
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
                    timeout_s)
                return cleanup(set_error(GPUCOLL_ERR_SYSTEM,
                                         "no answer from a rank on another node after %.0f s "
                                         "(unreachable over UCX? check UCX_TLS / UCX_NET_DEVICES)",
                                         timeout_s));
            // The job's progress engine, never from a progress thread (they
            // do not call MPI).
            if (config_.progress != nullptr && spins % 64 == 63 &&
                !intra::ProgressAgent::on_agent_thread())
                config_.progress();
            // More processes than cores: after a short spin, sleep until the
            // network has news (or 1 ms, for the abort checks and the job's
            // progress).
            if (config_.sleep_when_idle && ++idle > 256) transport_->wait(1);
        }
    }
    return kSuccess;
}

}  // namespace gpucoll::inter

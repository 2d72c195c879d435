#include "intra/node_comm.h"

#include <sched.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/counters.h"
#include "core/runtime.h"
#include "device/reduce_ops.h"
#include "intra/algorithms.h"

namespace gpucoll::intra {

// ---------------------------------------------------------------- DeviceBuffer

Status DeviceBuffer::allocate(Device* device, size_t bytes) {
    reset();
    void* p = nullptr;
    GPUCOLL_TRY(device->alloc(&p, bytes));
    device_ = device;
    ptr_ = p;
    size_ = bytes;
    return kSuccess;
}

Status DeviceBuffer::reserve(Device* device, size_t bytes) {
    if (ptr_ != nullptr && size_ >= bytes) return kSuccess;
    return allocate(device, bytes);
}

void DeviceBuffer::reset() {
    if (ptr_ != nullptr) device_->free(ptr_);
    ptr_ = nullptr;
    size_ = 0;
}

// ---------------------------------------------------------------- setup

namespace {

// Who a rank is, exchanged once per communicator.
struct Hello {
    char node[96];    // boot id + host name: equal on one node
    char backend[8];  // "cuda", "emu", "none"
    int32_t pid;
};

std::string node_identity() {
    std::string id;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::getline(boot, id);
    char host[64] = {};
    gethostname(host, sizeof host - 1);
    return id + "/" + host;
}

// Every rank learns whether every rank succeeded.
Status agree(const gpucoll_bootstrap_t& bs, bool ok, bool* all_ok) {
    std::vector<int32_t> all(static_cast<size_t>(bs.size));
    int32_t mine = ok ? 1 : 0;
    if (bs.allgather(bs.ctx, &mine, all.data(), sizeof mine) != 0)
        return set_error(GPUCOLL_ERR_BOOTSTRAP, "bootstrap allgather failed");
    *all_ok = true;
    for (int32_t v : all) *all_ok = *all_ok && v == 1;
    return kSuccess;
}

template <typename T>
Status allgather(const gpucoll_bootstrap_t& bs, const T& mine, std::vector<T>* all) {
    all->resize(static_cast<size_t>(bs.size));
    if (bs.allgather(bs.ctx, &mine, all->data(), sizeof(T)) != 0)
        return set_error(GPUCOLL_ERR_BOOTSTRAP, "bootstrap allgather failed");
    return kSuccess;
}

}  // namespace

Status NodeComm::create(const gpucoll_bootstrap_t& bs, const gpucoll_comm_config_t& config,
                        std::unique_ptr<NodeComm>* out) {
    out->reset();
    std::unique_ptr<NodeComm> comm(new NodeComm());
    comm->rank_ = bs.rank;
    comm->size_ = bs.size;
    comm->config_ = config;
    comm->device_ = Runtime::instance().device();
    comm->cache_ = &Runtime::instance().ipc_cache();

    Hello hello{};
    std::snprintf(hello.node, sizeof hello.node, "%s", node_identity().c_str());
    std::snprintf(hello.backend, sizeof hello.backend, "%s",
                  comm->device_ ? comm->device_->name() : "none");
    hello.pid = getpid();
    std::vector<Hello> all;
    GPUCOLL_TRY(allgather(bs, hello, &all));
    for (const Hello& h : all) {
        if (std::strcmp(h.node, all[0].node) != 0) {
            comm->log(1, "accelerated path off: the ranks span several nodes");
            return kSuccess;
        }
        if (std::strcmp(h.backend, hello.backend) != 0 || std::strcmp(h.backend, "none") == 0) {
            comm->log(1, "accelerated path off: device backends differ or none is active");
            return kSuccess;
        }
    }
    for (const Hello& h : all) comm->pids_.push_back(h.pid);
    comm->peer_seen_.assign(all.size(), 0);

    Status s = comm->setup(bs, config);
    if (s == GPUCOLL_DECLINED) return kSuccess;  // setup failed somewhere: logged
    GPUCOLL_TRY(s);
    comm->log(1, "accelerated path on: %d ranks on one node, backend %s", comm->size_,
              hello.backend);
    *out = std::move(comm);
    return kSuccess;
}

Status NodeComm::setup(const gpucoll_bootstrap_t& bs, const gpucoll_comm_config_t& config) {
    cache_->set_capacity(std::max<size_t>(config.ipc_cache_entries, 4 * size_t(size_)));
    Status s = setup_segment(bs);
    if (s != kSuccess) return s;
    return setup_scratch(bs);
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
    GPUCOLL_TRY(allgather(bs, where, &all));
    bool ok = all[0].ok != 0;
    if (ok && rank_ != 0) ok = segment_.attach(all[0].pid, all[0].fd, size_) == kSuccess;
    if (!ok) log(1, "node segment unavailable: %s", last_error());
    bool all_ok = false;
    GPUCOLL_TRY(agree(bs, ok, &all_ok));
    segment_.close_fd();  // everyone has it mapped (or gave up): nothing stays behind
    return all_ok ? kSuccess : GPUCOLL_DECLINED;
}

Status NodeComm::setup_scratch(const gpucoll_bootstrap_t& bs) {
    // Two one-shot slots per rank, rounded to 256 bytes so slots stay aligned.
    scratch_slot_bytes_ = (config_.one_shot_max_bytes + 255) / 256 * 256;
    struct Exported {
        BufferDesc desc;
        int32_t ok;
    } mine{};
    mine.ok = scratch_.allocate(device_, 2 * scratch_slot_bytes_) == kSuccess &&
              cache_->describe(device_, scratch_.data(), &mine.desc) == kSuccess;
    std::vector<Exported> all;
    GPUCOLL_TRY(allgather(bs, mine, &all));
    bool ok = true;
    peer_scratch_.assign(static_cast<size_t>(size_), nullptr);
    for (int p = 0; p < size_ && ok; ++p) {
        const Exported& e = all[static_cast<size_t>(p)];
        if (e.ok == 0) {
            ok = false;
        } else if (pids_[p] == getpid()) {
            peer_scratch_[p] = reinterpret_cast<char*>(e.desc.base) + e.desc.offset;
        } else {
            std::unique_ptr<IpcMapping> m;
            ok = device_->ipc_import(e.desc.handle, &m) == kSuccess;
            if (ok) {
                peer_scratch_[p] = static_cast<char*>(m->address()) + e.desc.offset;
                scratch_mappings_.push_back(std::move(m));
            }
        }
    }
    if (!ok) log(1, "scratch exchange failed: %s", last_error());
    bool all_ok = false;
    GPUCOLL_TRY(agree(bs, ok, &all_ok));
    return all_ok ? kSuccess : GPUCOLL_DECLINED;
}

NodeComm::~NodeComm() {
    // Every peer has posted our last call (so it finished the ones before),
    // and if that call ran accelerated, finished it too. Not after a failure.
    if (seq_ > 0 && !aborted()) {
        const uint64_t step = last_accelerated_ == seq_ ? kStepDone : 0;
        for (int p = 0; p < size_; ++p)
            if (p != rank_ && wait_progress(p, progress_word(seq_, step)) != kSuccess) break;
    }
    // Peers' mappings go first, then our own buffers; the segment unmaps last.
    scratch_mappings_.clear();
}

char* NodeComm::scratch_slot(int p, uint64_t seq) const {
    return peer_scratch_[p] + (seq % 2) * scratch_slot_bytes_;
}

// ---------------------------------------------------------------- progress

int NodeComm::fail(Status s) {
    log(1, "accelerated call failed: %s", last_error());
    abort();
    poisoned_ = true;
    return s;
}

void NodeComm::abort() { segment_.header().abort.store(1, std::memory_order_release); }

bool NodeComm::aborted() const {
    return segment_.header().abort.load(std::memory_order_acquire) != 0;
}

Status NodeComm::wait_progress(int peer, uint64_t word) {
    const std::atomic<uint64_t>& flag = segment_.slot(peer).progress;
    for (unsigned spins = 0;; ++spins) {
        if (flag.load(std::memory_order_acquire) >= word) return kSuccess;
        if (aborted())
            return set_error(GPUCOLL_ERR_INTERNAL,
                             "a peer failed during a gpucoll collective on this communicator; "
                             "see its error output");
        if (spins < 128)
            __builtin_ia32_pause();
        else
            sched_yield();
    }
}

Status NodeComm::wait_all_seen(uint64_t word) {
    for (int p = 0; p < size_; ++p) {
        if (p == rank_ || peer_seen_[p] >= word) continue;
        GPUCOLL_TRY(wait_progress(p, word));
        peer_seen_[p] = segment_.slot(p).progress.load(std::memory_order_acquire);
    }
    return kSuccess;
}

void NodeComm::log(int level, const char* fmt, ...) const {
    if (config_.verbose < level) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (config_.log != nullptr)
        config_.log(level, msg);
    else
        std::fprintf(stderr, "gpucoll[%d]: %s\n", rank_, msg);
}

// ---------------------------------------------------------------- one call

namespace {

bool is_device(Device* d, const void* p) {
    PointerInfo info;
    return p != nullptr && d->query(p, &info) == kSuccess && info.type == GPUCOLL_MEM_DEVICE;
}

// Are all buffers that matter for this rank device memory?
bool buffers_on_device(Device* d, const gpucoll_call_t& c, int rank) {
    switch (c.coll) {
        case GPUCOLL_COLL_BCAST:
            return is_device(d, c.recvbuf);
        case GPUCOLL_COLL_REDUCE:
            if (c.sendbuf != nullptr && !is_device(d, c.sendbuf)) return false;
            return rank != c.root || is_device(d, c.recvbuf);
        default:
            return (c.sendbuf == nullptr || is_device(d, c.sendbuf)) && is_device(d, c.recvbuf);
    }
}

}  // namespace

Status NodeComm::prepare(const gpucoll_call_t& call, gpucoll_algorithm_t algo, uint64_t seq) {
    const Algorithm* a = find_algorithm(call.coll, algo);
    const size_t elem = reduce::dtype_size(call.dtype);
    if (a->temp_bytes != nullptr)
        GPUCOLL_TRY(temp_.reserve(device_, a->temp_bytes(call, size_, elem)));
    if (a->input_in_scratch) {
        // Our slot for this call was last read by peers two calls ago: every
        // peer has moved on once it posted the previous call.
        if (seq > 1) GPUCOLL_TRY(wait_all_seen(progress_word(seq - 1, 0)));
        const void* in = call.sendbuf != nullptr ? call.sendbuf : call.recvbuf;
        GPUCOLL_TRY(device_->memcpy(scratch_slot(rank_, seq), in, call.count * elem, nullptr));
    }
    return kSuccess;
}

// Buffers that IPC cannot export (cudaMallocAsync pools, cuMemCreate) are
// replaced by exportable copies: peers then work on the copies, and the
// results are copied back after the call. Local copies only: the bytes
// between peers stay the same.
Status NodeComm::shadow_unexportable(gpucoll_call_t* call, bool* recv_shadowed) {
    *recv_shadowed = false;
    const BufferBytes bytes = buffer_bytes(*call, size_, rank_, reduce::dtype_size(call->dtype));
    auto shadow = [&](const void* user, size_t n, DeviceBuffer& copy, void** out) -> Status {
        *out = nullptr;
        if (user == nullptr || n == 0) return kSuccess;
        BufferDesc desc;
        const Status s = cache_->describe(device_, user, &desc);
        if (s != GPUCOLL_ERR_UNSUPPORTED) return s;
        GPUCOLL_TRY(copy.reserve(device_, n));
        GPUCOLL_TRY(device_->memcpy(copy.data(), user, n, nullptr));
        *out = copy.data();
        return kSuccess;
    };
    void* send_copy = nullptr;
    void* recv_copy = nullptr;
    GPUCOLL_TRY(shadow(call->sendbuf, bytes.send, shadow_send_, &send_copy));
    GPUCOLL_TRY(shadow(call->recvbuf, bytes.recv, shadow_recv_, &recv_copy));
    if (send_copy != nullptr) call->sendbuf = send_copy;
    if (recv_copy != nullptr) {
        call->recvbuf = recv_copy;
        *recv_shadowed = true;
    }
    return kSuccess;
}

Status NodeComm::post(uint64_t seq, PostKind kind, const gpucoll_call_t* call,
                      gpucoll_algorithm_t algo) {
    // Do not overwrite a post that a peer may still have to read. What we saw
    // of a peer's progress stays true (it only grows): look again only when
    // that is not enough, about once every kPostDepth calls.
    if (seq >= kPostDepth) GPUCOLL_TRY(wait_all_seen(progress_word(seq - kPostDepth + 1, 0)));
    Post& post = segment_.slot(rank_).posts[seq % kPostDepth];
    if (kind == PostKind::Accelerate) {  // peers read descriptors of accelerated posts only
        post = Post{};
        // Buffers of no significant size (a zero block of reduce_scatter, the
        // receive buffer of a non-root reduce) are nobody's to read.
        const BufferBytes bytes = buffer_bytes(*call, size_, rank_, reduce::dtype_size(call->dtype));
        const void* bufs[kPostedBuffers] = {bytes.send != 0 ? call->sendbuf : nullptr,
                                            bytes.recv != 0 ? call->recvbuf : nullptr, nullptr};
        if (find_algorithm(call->coll, algo)->temp_bytes != nullptr) bufs[kTempBuf] = temp_.data();
        for (int b = 0; b < kPostedBuffers && kind == PostKind::Accelerate; ++b)
            if (bufs[b] != nullptr &&
                cache_->describe(device_, bufs[b], &post.buf[b]) != kSuccess) {
                log(10, "call %llu: cannot export a buffer (%s): declining",
                    static_cast<unsigned long long>(seq), last_error());
                kind = PostKind::Decline;
            }
    }
    post.kind = kind;
    segment_.slot(rank_).progress.store(progress_word(seq, 0), std::memory_order_release);
    return kSuccess;
}

int NodeComm::run(const gpucoll_call_t& call) {
    if (poisoned_)
        return set_error(GPUCOLL_ERR_INTERNAL,
                         "this communicator's accelerated path failed earlier; free it");
    const size_t elem = reduce::dtype_size(call.dtype);
    if (elem == 0) return GPUCOLL_DECLINED;  // ineligible calls may carry any dtype
    const char* why = "";
    const gpucoll_algorithm_t algo =
        select_algorithm(call, size_, elem, config_, scratch_slot_bytes_, &why);
    if (algo == GPUCOLL_ALGO_STAGED) return GPUCOLL_DECLINED;  // by size or configuration

    const uint64_t seq = ++seq_;
    PostKind kind = call.eligible && buffers_on_device(device_, call, rank_) ? PostKind::Accelerate
                                                                             : PostKind::Decline;
    gpucoll_call_t local = call;  // user buffers, or exportable copies of them
    bool recv_shadowed = false;
    if (kind == PostKind::Accelerate && (shadow_unexportable(&local, &recv_shadowed) != kSuccess ||
                                         prepare(local, algo, seq) != kSuccess)) {
        log(10, "call %llu: preparation failed (%s): declining",
            static_cast<unsigned long long>(seq), last_error());
        kind = PostKind::Decline;
    }
    Status s = post(seq, kind, &local, algo);
    if (s != kSuccess) return fail(s);
    if (segment_.slot(rank_).posts[seq % kPostDepth].kind == PostKind::Decline)
        return GPUCOLL_DECLINED;  // our own answer decides: no need to wait

    CallContext ctx(*this, local, seq);
    if ((s = ctx.wait_all(0)) != kSuccess) return fail(s);
    for (int p = 0; p < size_; ++p)
        if (post_of(p, seq).kind != PostKind::Accelerate) return GPUCOLL_DECLINED;

    last_accelerated_ = seq;
    if ((s = find_algorithm(call.coll, algo)->run(ctx)) != kSuccess) return fail(s);
    ctx.signal(kStepDone);
    if (recv_shadowed) {
        const size_t out = buffer_bytes(call, size_, rank_, elem).out;
        if ((s = device_->memcpy(call.recvbuf, local.recvbuf, out, nullptr)) != kSuccess)
            return fail(s);
    }
    log(10, "call %llu: %s %s, %zu bytes: %llu bytes across IPC, %llu rounds (%s)",
        static_cast<unsigned long long>(seq), gpucoll_coll_name(call.coll),
        gpucoll_algorithm_name(algo), call_bytes(call, size_, elem),
        static_cast<unsigned long long>(ctx.bytes_peer),
        static_cast<unsigned long long>(ctx.rounds), why);
    counters_record({call.coll, GPUCOLL_PATH_ACCELERATED, 0, ctx.bytes_peer, ctx.rounds,
                     gpucoll_algorithm_name(algo)});
    return GPUCOLL_SUCCESS;
}

}  // namespace gpucoll::intra

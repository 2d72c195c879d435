// stream_comm.cc - a stream-ordered communicator on one node: setup, the
// enqueue of a call's steps, and the monitor (stream_comm.h).
#include "stream/stream_comm.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/bootstrap.h"
#include "core/runtime.h"
#include "device/reduce_ops.h"
#include "intra/algorithms.h"

namespace gpucoll::stream {

namespace {

constexpr size_t kDefaultChunk = 256 << 10;

// The chunk each slot holds: GPUCOLL_STREAM_CHUNK_BYTES (4 KiB to 64 MiB,
// rounded down to 64 bytes) or 256 KiB. Every rank must use the same.
size_t chunk_from_environment() {
    const char* v = std::getenv("GPUCOLL_STREAM_CHUNK_BYTES");
    if (v == nullptr || *v == '\0') return kDefaultChunk;
    size_t c = std::strtoull(v, nullptr, 10);
    c = std::min<size_t>(std::max<size_t>(c, 4096), size_t{64} << 20);
    return c / 64 * 64;
}

// What each rank tells the others at setup.
struct Hello {
    int32_t pid = 0;
    int32_t ok = 0;
    uint64_t chunk = 0;
    char node[160] = {};
    char reason[200] = {};
    IpcHandle handle{};
};

// Whether process pid still runs (a zombie has ended: its parent has not
// reaped it yet).
bool process_alive(pid_t pid) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    FILE* f = std::fopen(path, "r");
    if (f == nullptr) return true;  // cannot tell: alive
    char line[512] = {};
    const bool read = std::fgets(line, sizeof line, f) != nullptr;
    std::fclose(f);
    const char* close = read ? std::strrchr(line, ')') : nullptr;  // "pid (comm) S ..."
    return close == nullptr || (close[1] != '\0' && close[2] != 'Z' && close[2] != 'X');
}

}  // namespace

Status StreamComm::create(const gpucoll_bootstrap_t& bootstrap, const std::string& reason,
                          void* native_stream, std::unique_ptr<StreamComm>* out) {
    std::unique_ptr<StreamComm> sc(new StreamComm());
    GPUCOLL_TRY(sc->setup(bootstrap, reason, native_stream));
    *out = std::move(sc);
    return kSuccess;
}

Status StreamComm::setup(const gpucoll_bootstrap_t& bs, const std::string& component_reason,
                         void* native) {
    rank_ = bs.rank;
    size_ = bs.size;
    device_ = Runtime::instance().device();
    chunk_ = chunk_from_environment();
    std::string reason = component_reason;
    if (reason.empty() && device_ == nullptr)
        reason = "no device backend is active (gpucoll_backend() is \"none\")";
    if (reason.empty() && native == nullptr) reason = "the stream is NULL";
    if (reason.empty() && device_->borrow_stream(native, &stream_) != kSuccess)
        reason = last_error();
    Hello mine;
    mine.pid = static_cast<int32_t>(::getpid());
    mine.chunk = chunk_;
    std::snprintf(mine.node, sizeof mine.node, "%s", intra::node_identity().c_str());
    if (reason.empty()) {
        const size_t bytes = intra::NodeComm::kFlagBytes + kSlots * chunk_;
        if (scratch_.allocate(device_, bytes) != kSuccess ||
            device_->ipc_export(scratch_.data(), &mine.handle) != kSuccess) {
            reason = std::string("setting up its slots failed: ") + last_error();
        } else {
            std::vector<uint64_t> zeros(intra::NodeComm::kFlagBytes / sizeof(uint64_t), 0);
            if (device_->memcpy(scratch_.data(), zeros.data(), intra::NodeComm::kFlagBytes,
                                nullptr) != kSuccess)
                reason = std::string("clearing its flags failed: ") + last_error();
        }
    }
    mine.ok = reason.empty() ? 1 : 0;
    std::snprintf(mine.reason, sizeof mine.reason, "%s", reason.c_str());
    std::vector<Hello> all;
    GPUCOLL_TRY(bootstrap_allgather(bs, mine, &all));
    for (int p = 0; p < size_ && refusal_.empty(); ++p) {
        const Hello& h = all[static_cast<size_t>(p)];
        if (!h.ok)
            refusal_ =
                "rank " + std::to_string(p) + " cannot take stream-ordered calls: " + h.reason;
        else if (std::strcmp(h.node, mine.node) != 0)
            refusal_ =
                "the communicator spans nodes (rank " + std::to_string(p) +
                " is on another node): stream-ordered calls between nodes are not implemented "
                "yet; use the blocking or nonblocking form after synchronising the stream";
        else if (h.chunk != chunk_)
            refusal_ = "GPUCOLL_STREAM_CHUNK_BYTES differs between ranks (rank " +
                       std::to_string(p) + ": " + std::to_string(h.chunk) + ", here " +
                       std::to_string(chunk_) + ")";
    }
    base_.assign(static_cast<size_t>(size_), nullptr);
    pids_.assign(static_cast<size_t>(size_), 0);
    srcs_.assign(static_cast<size_t>(size_), nullptr);
    bool ok = refusal_.empty();
    std::string why;
    if (ok) {
        for (int p = 0; p < size_; ++p) {
            pids_[static_cast<size_t>(p)] = all[static_cast<size_t>(p)].pid;
            if (p == rank_) {
                base_[static_cast<size_t>(p)] = static_cast<char*>(scratch_.data());
                continue;
            }
            std::unique_ptr<IpcMapping> m;
            if (device_->ipc_import(all[static_cast<size_t>(p)].handle, &m) != kSuccess) {
                ok = false;
                why = "mapping rank " + std::to_string(p) + "'s slots failed: " + last_error();
                break;
            }
            base_[static_cast<size_t>(p)] = static_cast<char*>(m->address());
            mappings_.push_back(std::move(m));
        }
        if (ok &&
            (device_->create_stream(&watch_) != kSuccess ||
             device_->alloc_host(reinterpret_cast<void**>(&words_),
                                 sizeof(uint64_t) * static_cast<size_t>(size_)) != kSuccess)) {
            ok = false;
            why = std::string("the monitor's stream failed: ") + last_error();
        }
        bool all_ok = false;
        GPUCOLL_TRY(bootstrap_agree(bs, ok, &all_ok));
        if (!all_ok)
            refusal_ =
                why.empty() ? "setting up the slots failed on another rank (see its error)" : why;
    }
    if (!refusal_.empty()) {  // nothing to watch: release what was made
        mappings_.clear();
        scratch_.reset();
        stream_.reset();
        return kSuccess;
    }
    monitor_ = std::jthread([this](std::stop_token stop) { monitor_loop(stop); });
    return kSuccess;
}

StreamComm::~StreamComm() {
    if (monitor_.joinable()) {
        std::unique_lock lock(mutex_);
        using namespace std::chrono_literals;
        // The stream passes every call (the monitor releases waits on a
        // failed rank), then the peers finish reading our slots.
        for (;;) {
            bool done = ticket_ == 0;
            if (!done && stream_->reached(ticket_, &done) != kSuccess) break;
            if (done) break;
            bool idle = false;
            if (stream_->query(&idle) != kSuccess || (idle && failure_ != kSuccess)) break;
            wake_.wait_for(lock, 1ms);
        }
        while (failure_ == kSuccess && !peers_done(g_)) wake_.wait_for(lock, 1ms);
        lock.unlock();
        monitor_.request_stop();
        monitor_.join();
    }
    if (words_ != nullptr) (void)device_->free_host(words_);
}

Status StreamComm::status() {
    std::lock_guard lock(mutex_);
    if (!refusal_.empty()) return set_error(GPUCOLL_ERR_UNSUPPORTED, "%s", refusal_.c_str());
    if (failure_ != kSuccess) return set_error(failure_, "%s", failure_message_.c_str());
    return kSuccess;
}

Status StreamComm::check_buffer(const void* p, size_t bytes, const char* what) const {
    PointerInfo info;
    if (device_->query(p, &info) != kSuccess || info.type != GPUCOLL_MEM_DEVICE)
        return set_error(GPUCOLL_ERR_UNSUPPORTED,
                         "%s %p is host memory: stream-ordered calls take device buffers only "
                         "(the CPU would touch a host buffer out of stream order); copy it to "
                         "device memory on the stream first",
                         what, p);
    if (!info.complete)
        return set_error(GPUCOLL_ERR_UNSUPPORTED,
                         "%s %p: the device runtime cannot say which allocation holds it, so "
                         "the call cannot be checked; refused",
                         what, p);
    return check_extent(info, p, bytes, what);
}

Status StreamComm::check_call(const gpucoll_call_t& call) const {
    switch (call.coll) {
        case GPUCOLL_COLL_ALLREDUCE:
        case GPUCOLL_COLL_BCAST:
        case GPUCOLL_COLL_ALLGATHER:
        case GPUCOLL_COLL_REDUCE_SCATTER:
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
        case GPUCOLL_COLL_REDUCE:
            break;
        default:
            return set_error(GPUCOLL_ERR_UNSUPPORTED,
                             "%s has no stream-ordered form (allreduce, bcast, allgather, "
                             "reduce_scatter(_block) and reduce have)",
                             gpucoll_coll_name(call.coll));
    }
    if (!call.eligible)
        return set_error(GPUCOLL_ERR_UNSUPPORTED,
                         "this call cannot run on the device path (see the caller's reason)");
    if ((unsigned)call.dtype >= (unsigned)GPUCOLL_DTYPE_COUNT)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "bad datatype %d", call.dtype);
    const bool reduces = call.coll != GPUCOLL_COLL_BCAST && call.coll != GPUCOLL_COLL_ALLGATHER;
    if (reduces &&
        (!gpucoll_op_valid(call.dtype, call.op) || !device_->reduce_supported(call.dtype, call.op)))
        return set_error(GPUCOLL_ERR_UNSUPPORTED,
                         "%s of %s with %s: the device reductions of the %s backend do not do it",
                         gpucoll_coll_name(call.coll), gpucoll_dtype_name(call.dtype),
                         gpucoll_op_name(call.op), device_->name());
    if ((call.coll == GPUCOLL_COLL_BCAST || call.coll == GPUCOLL_COLL_REDUCE) &&
        (call.root < 0 || call.root >= size_))
        return set_error(GPUCOLL_ERR_INVALID_ARG, "root %d is not a rank of the communicator",
                         call.root);
    if (call.coll == GPUCOLL_COLL_REDUCE_SCATTER && call.counts == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "reduce_scatter without counts");
    const size_t elem = reduce::dtype_size(call.dtype);
    const intra::BufferBytes b = intra::buffer_bytes(call, size_, rank_, elem);
    if (call.sendbuf != nullptr && b.send > 0)
        GPUCOLL_TRY(check_buffer(call.sendbuf, b.send, "send buffer"));
    const size_t recv = std::max(b.recv, b.out);
    if (recv > 0) GPUCOLL_TRY(check_buffer(call.recvbuf, recv, "receive buffer"));
    return kSuccess;
}

Status StreamComm::enqueue(const gpucoll_call_t& call) {
    std::unique_lock lock(mutex_);
    if (!refusal_.empty()) return set_error(GPUCOLL_ERR_UNSUPPORTED, "%s", refusal_.c_str());
    if (failure_ != kSuccess)
        return set_error(failure_,
                         "a stream-ordered call on this communicator failed earlier: %s; the "
                         "calls enqueued since then ran on undefined data (free the communicator)",
                         failure_message_.c_str());
    GPUCOLL_TRY(check_call(call));
    const size_t elem = reduce::dtype_size(call.dtype);
    const uint64_t total = staged_bytes(call, size_, elem);
    if (total == 0) return kSuccess;
    // At most Stream::kMaxMarks calls in flight (one marker each): wait for
    // the oldest beyond that with the lock released (the monitor must run).
    constexpr uint64_t kBound = Stream::kMaxMarks - 8;
    while (ticket_ >= kBound) {
        bool done = false;
        if (stream_->reached(ticket_ - kBound + 1, &done) != kSuccess || done) break;
        using namespace std::chrono_literals;
        wake_.wait_for(lock, 1ms);
        if (failure_ != kSuccess) return set_error(failure_, "%s", failure_message_.c_str());
    }
    const uint64_t steps = (total + chunk_ - 1) / chunk_;
    for (uint64_t j = 0; j < steps; ++j)
        GPUCOLL_TRY(enqueue_step(call, step_of(call, rank_, size_, elem, chunk_, j)));
    return stream_->mark(&ticket_);
}

Status StreamComm::enqueue_step(const gpucoll_call_t& call, const Step& s) {
    Stream* st = stream_.get();
    const uint64_t g = ++g_;
    const size_t elem = reduce::dtype_size(call.dtype);
    const size_t bytes = s.end - s.begin;
    auto wait_all = [&](size_t which, uint64_t value) -> Status {
        for (int p = 0; p < size_; ++p)
            if (p != rank_) GPUCOLL_TRY(device_->wait_flag(flag(p, which), value, st));
        return kSuccess;
    };
    auto reduce_slots = [&](char* dst, size_t offset, size_t n) -> Status {
        for (int p = 0; p < size_; ++p) srcs_[static_cast<size_t>(p)] = slot(p, g) + offset;
        return device_->reduce(dst, srcs_.data(), size_, n / elem, call.dtype, call.op, st);
    };
    // Our slot g % kSlots was last read in step g - kSlots.
    if (g > kSlots) GPUCOLL_TRY(wait_all(kDone, g - kSlots));
    if (s.in_bytes > 0) GPUCOLL_TRY(device_->memcpy(slot(rank_, g), s.in, s.in_bytes, st));
    GPUCOLL_TRY(device_->write_flag(flag(rank_, kReady), g, st));
    char* recv = static_cast<char*>(call.recvbuf);
    switch (call.coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            GPUCOLL_TRY(wait_all(kReady, g));
            GPUCOLL_TRY(reduce_slots(recv + s.begin, 0, bytes));
            break;
        case GPUCOLL_COLL_REDUCE:
            if (rank_ != call.root) break;
            GPUCOLL_TRY(wait_all(kReady, g));
            GPUCOLL_TRY(reduce_slots(recv + s.begin, 0, bytes));
            break;
        case GPUCOLL_COLL_BCAST:
            if (rank_ == call.root) break;
            GPUCOLL_TRY(device_->wait_flag(flag(call.root, kReady), g, st));
            GPUCOLL_TRY(device_->memcpy(recv + s.begin, slot(call.root, g), bytes, st));
            break;
        case GPUCOLL_COLL_ALLGATHER: {
            GPUCOLL_TRY(wait_all(kReady, g));
            const size_t block = call.count * elem;
            for (int p = 0; p < size_; ++p) {
                if (p == rank_ && call.sendbuf == nullptr) continue;  // in place: already there
                GPUCOLL_TRY(device_->memcpy(recv + static_cast<size_t>(p) * block + s.begin,
                                            slot(p, g), bytes, st));
            }
            break;
        }
        default: {  // reduce_scatter(_block): the part of this rank's block in the chunk
            const size_t d = intra::rs_displ(call, rank_) * elem;
            const size_t c = intra::rs_count(call, rank_) * elem;
            const size_t lo = std::max<size_t>(s.begin, d), hi = std::min<size_t>(s.end, d + c);
            if (lo >= hi) break;
            GPUCOLL_TRY(wait_all(kReady, g));
            GPUCOLL_TRY(reduce_slots(recv + (lo - d), lo - s.begin, hi - lo));
            break;
        }
    }
    return device_->write_flag(flag(rank_, kDone), g, st);
}

// ---------------------------------------------------------------- the monitor

void StreamComm::monitor_loop(std::stop_token stop) {
    using namespace std::chrono_literals;
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
        wake_.wait_for(lock, stop, 10ms, [] { return false; });
        if (stop.stop_requested()) return;
        check_health();
    }
}

bool StreamComm::peers_done(uint64_t g) {
    for (int p = 0; p < size_; ++p)
        if (p != rank_ &&
            device_->memcpy(&words_[p], flag(p, kDone), sizeof(uint64_t), watch_.get()) != kSuccess)
            return true;  // nothing more can be learnt
    if (watch_->synchronize() != kSuccess) return true;
    for (int p = 0; p < size_; ++p)
        if (p != rank_ && words_[p] < g) return false;
    return true;
}

void StreamComm::check_health() {
    if (failure_ != kSuccess) return;
    bool in_flight = false;
    if (ticket_ != 0) {
        bool done = false;
        if (stream_->reached(ticket_, &done) != kSuccess) {
            declare_failed(rank_, std::string("this rank's stream failed: ") + last_error());
            return;
        }
        if (!done) {
            bool idle = false;
            if (stream_->query(&idle) == kSuccess && idle &&
                stream_->reached(ticket_, &done) == kSuccess && !done) {
                declare_failed(rank_,
                               "this rank's stream dropped its work (a failure there was "
                               "reported to a synchronisation of the stream)");
                return;
            }
        }
        in_flight = !done;
    }
    for (int p = 0; p < size_; ++p)
        if (p != rank_ && device_->memcpy(&words_[p], flag(p, kReady), sizeof(uint64_t),
                                          watch_.get()) != kSuccess)
            return;
    if (watch_->synchronize() != kSuccess) return;
    for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        if (words_[p] >= kAborted) {
            declare_failed(p, "rank " + std::to_string(p) +
                                  " failed in a stream-ordered call (see its error output)");
            return;
        }
        if (in_flight && !process_alive(pids_[static_cast<size_t>(p)])) {
            declare_failed(p, "rank " + std::to_string(p) + " (pid " +
                                  std::to_string(pids_[static_cast<size_t>(p)]) +
                                  ") ended while stream-ordered calls were in flight");
            return;
        }
    }
}

void StreamComm::declare_failed(int who, const std::string& message) {
    failure_ = GPUCOLL_ERR_DEVICE;
    failure_message_ = message;
    std::fprintf(stderr, "gpucoll: stream-ordered communicator, rank %d: %s\n", rank_,
                 message.c_str());
    // Every wait on the failed rank passes from now on.
    (void)device_->write_flag(flag(who, kReady), kAborted, watch_.get());
    (void)device_->write_flag(flag(who, kDone), kAborted, watch_.get());
    (void)watch_->synchronize();
    wake_.notify_all();
}

}  // namespace gpucoll::stream

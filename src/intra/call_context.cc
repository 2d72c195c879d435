#include <algorithm>

#include "core/timing.h"
#include "device/reduce_ops.h"
#include "intra/algorithms.h"
#include "intra/node_comm.h"

namespace gpucoll::intra {

CallContext::CallContext(NodeComm& c, const gpucoll_call_t& k, uint64_t s)
    : comm(c),
      call(k),
      seq(s),
      rank(c.rank()),
      size(c.size()),
      device(c.device()),
      elem(reduce::dtype_size(k.dtype)),
      stream_(c.pipelined() ? c.stream() : nullptr),
      device_flags_(c.device_flags() && c.stream() != nullptr),
      pins_(c.pins_) {}

const void** CallContext::sources() { return comm.sources_.data(); }

char** CallContext::inputs() { return comm.inputs_.data(); }

Status CallContext::resolve(int p, int which, char** out) {
    const timing::Scope timed(call.coll, timing::kResolve);
    const BufferDesc& desc = comm.post_of(p, seq).buf[which];
    if (desc.buffer_id == 0)
        return set_error(GPUCOLL_ERR_INTERNAL, "rank %d posted no buffer %d for call %llu", p,
                         which, static_cast<unsigned long long>(seq));
    // What rank p's buffer must hold for this call (the same arguments on
    // every rank; in place where p posted no send buffer).
    size_t needed = 0;
    if (which != kTempBuf) {
        gpucoll_call_t theirs = call;
        const bool p_in_place = comm.post_of(p, seq).buf[kSendBuf].buffer_id == 0;
        theirs.sendbuf = p_in_place ? nullptr : &theirs;  // only its nullness matters
        const BufferBytes b = comm.bytes_of(theirs, p);
        needed = which == kSendBuf ? b.send : std::max(b.recv, b.out);
    }
    void* addr = nullptr;
    size_t mapped = desc.size;  // a thread-rank of this process: its own allocation
    if (desc.internal != 0) {
        GPUCOLL_TRY(comm.resolve_internal(p, desc, &addr, &mapped));
    } else {
        std::shared_ptr<IpcMapping> pin;
        GPUCOLL_TRY(comm.cache().resolve(device, comm.ordinal(), comm.pid(p), desc, &addr, &pin));
        if (pin) {
            mapped = pin->size();
            pins_.push_back(std::move(pin));
        }
    }
    // Never trust a peer's description: what we touch lies inside what we
    // mapped (offset + bytes <= claimed size <= mapped size).
    if (desc.size > mapped || desc.offset > desc.size || needed > desc.size - desc.offset) {
        return set_error(
            GPUCOLL_ERR_BUFFER,
            "rank %d's buffer %d of call %llu: the call needs %zu bytes at offset %llu of "
            "what it describes as a %llu-byte allocation, of which %zu bytes are "
            "mapped here; refusing to read or write past them",
            p, which, static_cast<unsigned long long>(seq), needed,
            static_cast<unsigned long long>(desc.offset),
            static_cast<unsigned long long>(desc.size), mapped);
    }
    *out = static_cast<char*>(addr);
    return kSuccess;
}

Status CallContext::input(int p, char** out) {
    if (p == rank) {
        const void* in = call.sendbuf != nullptr ? call.sendbuf : call.recvbuf;
        *out = static_cast<char*>(const_cast<void*>(in));
        return kSuccess;
    }
    return resolve(p, comm.post_of(p, seq).buf[kSendBuf].buffer_id != 0 ? kSendBuf : kRecvBuf, out);
}

Status CallContext::output(int p, char** out) {
    if (p == rank) {
        *out = static_cast<char*>(call.recvbuf);
        return kSuccess;
    }
    return resolve(p, kRecvBuf, out);
}

Status CallContext::temp(int p, char** out) {
    if (p == rank) {
        *out = static_cast<char*>(comm.temp().data());
        return kSuccess;
    }
    return resolve(p, kTempBuf, out);
}

Status CallContext::signal(uint64_t step) {
    if (device_flags_)
        return device->write_flag(comm.flag(rank), progress_word(seq, step), stream_);
    if (stream_ != nullptr) return comm.signal_after_stream(progress_word(seq, step));
    comm.segment().store_release(comm.segment().slot(rank).progress, progress_word(seq, step));
    return kSuccess;
}

Status CallContext::wait_peer(int peer, uint64_t step) {
    const timing::Scope timed(call.coll, timing::kPeerWait);
    if (device_flags_) return device->wait_flag(comm.flag(peer), progress_word(seq, step), stream_);
    return comm.wait_progress(peer, progress_word(seq, step), true);
}

Status CallContext::finish() {
    if (device_flags_) {
        GPUCOLL_TRY(signal(kStepDone));
        GPUCOLL_TRY(comm.wait_stream(seq));
        // A peer that failed this call released our device waits with its
        // flag: what we computed is not to be trusted.
        if (comm.segment().load_acquire(comm.segment().header().abort) == seq)
            return set_error(GPUCOLL_ERR_INTERNAL,
                             "a peer failed during this gpucoll collective; see its error output");
    } else if (stream_ != nullptr) {
        GPUCOLL_TRY(comm.wait_stream(seq));
        GPUCOLL_TRY(comm.publish_reached());  // everything: the stream is idle
        // A peer that failed this call may have published steps before its
        // failure showed: what we read from it is not to be trusted.
        if (comm.segment().load_acquire(comm.segment().header().abort) == seq)
            return set_error(GPUCOLL_ERR_INTERNAL,
                             "a peer failed during this gpucoll collective; see its error output");
    }
    comm.segment().store_release(comm.segment().slot(rank).progress, progress_word(seq, kStepDone));
    return kSuccess;
}

Status CallContext::drain() {
    if (stream_ == nullptr) return kSuccess;
    GPUCOLL_TRY(comm.wait_stream(seq));
    if (!device_flags_) GPUCOLL_TRY(comm.publish_reached());
    return kSuccess;
}

Status CallContext::wait_all(uint64_t step) {
    for (int p = 0; p < size; ++p)
        if (p != rank) GPUCOLL_TRY(wait_peer(p, step));
    ++rounds;
    return kSuccess;
}

Status CallContext::copy(void* dst, const void* src, size_t bytes, bool crosses_peer) {
    if (bytes == 0 || dst == src) return kSuccess;
    const timing::Scope timed(call.coll, timing::kDevice);
    GPUCOLL_TRY(device->memcpy(dst, src, bytes, stream_));
    if (crosses_peer) bytes_peer += bytes;
    return kSuccess;
}

Status CallContext::reduce(void* dst, const void* const* srcs, int nsrc, size_t count,
                           size_t peer_srcs) {
    if (count == 0) return kSuccess;
    const timing::Scope timed(call.coll, timing::kDevice);
    GPUCOLL_TRY(device->reduce(dst, srcs, nsrc, count, call.dtype, call.op, stream_));
    bytes_peer += peer_srcs * count * elem;
    return kSuccess;
}

}  // namespace gpucoll::intra

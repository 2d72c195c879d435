// One-kernel allreduce (small messages, the latency path): one launch per
// rank does what one-shot does in three host-driven steps. The kernel copies
// the rank's input into its scratch slot, publishes the call's word in its
// flag, waits on the GPU for every peer's word, and reduces all slots in
// rank order (OneKernelAllreduce, device/device.h). The CPU launches it and
// waits for it once. Slot reuse needs no wait of its own: the agreement
// round of this call saw every peer post it, so every peer finished the
// call two back, the last to read this call's slot.
#include "core/timing.h"
#include "device/reduce_ops.h"
#include "intra/algorithms.h"
#include "intra/node_comm.h"

namespace gpucoll::intra {

Status allreduce_one_kernel(CallContext& ctx) {
    OneKernelAllreduce k;
    k.input = ctx.call.sendbuf != nullptr ? ctx.call.sendbuf : ctx.call.recvbuf;
    k.output = ctx.call.recvbuf;
    k.count = ctx.call.count;
    k.dtype = ctx.call.dtype;
    k.op = ctx.call.op;
    k.rank = ctx.rank;
    k.size = ctx.size;
    k.word = progress_word(ctx.seq, 1);
    for (int p = 0; p < ctx.size; ++p) {
        k.slots[p] = ctx.comm.scratch_slot(p, ctx.seq);
        k.flags[p] = ctx.comm.flag(p);
    }
    return ctx.one_kernel(k);
}

Status CallContext::one_kernel(const OneKernelAllreduce& k) {
    {
        const timing::Scope timed(call.coll, timing::kDevice);
        GPUCOLL_TRY(device->allreduce_one_kernel(k, comm.stream()));
    }
    bytes_peer += static_cast<uint64_t>(size - 1) * call.count * elem;
    ++rounds;
    if (stream_ != nullptr) return kSuccess;  // pipelined: finish() waits for the stream
    const timing::Scope timed(call.coll, timing::kPeerWait);
    GPUCOLL_TRY(comm.wait_stream(seq));
    // Released by a peer that failed this call (its word past every step):
    // what the kernel computed is not to be trusted.
    if (comm.segment().load_acquire(comm.segment().header().abort) == seq)
        return set_error(GPUCOLL_ERR_INTERNAL,
                         "a peer failed during this gpucoll collective; see its error output");
    return kSuccess;
}

bool NodeComm::one_kernel_usable(const gpucoll_call_t& call, size_t elem) const {
    return one_kernel_ok_ && call.coll == GPUCOLL_COLL_ALLREDUCE && elem != 0 && elem <= 16 &&
           (elem & (elem - 1)) == 0 && call.count * elem <= scratch_slot_bytes_ &&
           device_->reduce_supported(call.dtype, call.op);
}

gpucoll_algorithm_t NodeComm::with_one_kernel(const gpucoll_call_t& call, size_t elem,
                                              gpucoll_algorithm_t chosen, const char** why) const {
    if (chosen == GPUCOLL_ALGO_ONE_KERNEL) {
        if (one_kernel_usable(call, elem)) return chosen;
        const bool forced = config_.algorithm[call.coll] == GPUCOLL_ALGO_ONE_KERNEL;
        gpucoll_comm_config_t automatic = config_;
        automatic.algorithm[call.coll] = GPUCOLL_ALGO_AUTO;
        gpucoll_algorithm_t other =
            select_algorithm(call, size_, elem, automatic, scratch_slot_bytes_, ring_family_, why,
                             &model_table_, &measured_);
        if (other == GPUCOLL_ALGO_ONE_KERNEL)  // the measured table's: without it
            other = select_algorithm(call, size_, elem, automatic, scratch_slot_bytes_,
                                     ring_family_, why, &model_table_);
        *why = !forced ? "measured table: one_kernel, but the call does not fit it: auto's choice "
                         "without the table"
               : one_kernel_ok_
                   ? "one_kernel forced, but the call does not fit it: auto's choice"
                   : "one_kernel forced, but this communicator cannot take it (more than 8 ranks, "
                     "or ranks sharing a GPU without MPS): auto's choice";
        return other == GPUCOLL_ALGO_ONE_KERNEL ? GPUCOLL_ALGO_ONE_SHOT : other;
    }
    if (chosen == GPUCOLL_ALGO_ONE_SHOT && config_.algorithm[call.coll] == GPUCOLL_ALGO_AUTO &&
        call.count * elem <= config_.one_kernel_max_bytes && one_kernel_usable(call, elem)) {
        *why = "small: one kernel";
        return GPUCOLL_ALGO_ONE_KERNEL;
    }
    return chosen;
}

}  // namespace gpucoll::intra

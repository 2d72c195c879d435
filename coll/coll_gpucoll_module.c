/*
 * coll_gpucoll_module.c - the per-communicator module: saving the functions
 * that would have run without us, and the entry point of every intercepted
 * collective, which classifies the call as delegated, staged or accelerated.
 *
 * Path choice is rank-local: a rank whose buffers are all host memory calls
 * the saved function directly, a rank with a device buffer stages it and
 * calls the same saved function on host copies. Every rank therefore runs
 * the same host algorithm with host buffers, whatever the other ranks pass,
 * so no agreement between ranks is needed for these paths. (A device-to-
 * device path that changes the algorithm must agree first: see DESIGN.md,
 * "Correctness contract".)
 */
#include "coll_gpucoll.h"

/* ---------------------------------------------------------------------------
 * Calls into the saved host module
 * ------------------------------------------------------------------------- */

int mca_coll_gpucoll_core_error(const char* what, int status) {
    GPUCOLL_ERROR("%s failed: %s (gpucoll status %d)", what, gpucoll_last_error(), status);
    return GPUCOLL_ERR_BUFFER == status ? MPI_ERR_BUFFER : OMPI_ERROR;
}

static inline bool is_device(const void* p) {
    return NULL != p && MPI_IN_PLACE != p && GPUCOLL_MEM_DEVICE == gpucoll_mem_type(p);
}
static inline const void* gpucoll_user_buffer(const void* p) {
    return MPI_IN_PLACE == p ? NULL : p;
}

/* Runs the saved function: nested calls (from inside a saved algorithm) go
 * straight through; top-level calls are counted as delegated, unless the
 * fast path below counted them already. */
#define GPUCOLL_DELEGATE(m, name, coll_id, counted, ...)                                       \
    do {                                                                                       \
        if (mca_coll_gpucoll_in_host(m)) {                                                     \
            return (m)->prev_##name(__VA_ARGS__, (m)->prev_##name##_module);                   \
        }                                                                                      \
        mca_coll_gpucoll_enter_host(m);                                                        \
        int rc_ = (m)->prev_##name(__VA_ARGS__, (m)->prev_##name##_module);                    \
        mca_coll_gpucoll_leave_host(m);                                                        \
        if (!(counted)) {                                                                      \
            gpucoll_counters_record((coll_id), GPUCOLL_PATH_DELEGATED, 0, "delegated");        \
            GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL, #name ": host buffers, delegated"); \
        }                                                                                      \
        return rc_;                                                                            \
    } while (0)

/* Which of a and b are device memory (adev, bdev); a and b are where the
 * buffers' data lie (mca_coll_gpucoll_data_at: for MPI_BOTTOM, in the
 * datatype). Host buffers, the common case, through the core's host gate
 * (inline, gpucoll_host_gate_call), else in one call into the core: when
 * neither is, the decline is posted (peers may wait for it) and the call
 * counted, and we go to the saved function (sets counted). Before the core was tried, and with
 * verbose output per call (the level may change at run time, MPI_T), the
 * long way: classified here, then GPUCOLL_HOST_FAST_PATH. */
#define GPUCOLL_CLASSIFY(a, b, coll_id, adev, bdev)                                                \
    do {                                                                                           \
        const void* at_a_ = (a);                                                                   \
        const void* at_b_ = (b);                                                                   \
        if (m->host_fast && mca_coll_gpucoll_component.verbose < MCA_COLL_GPUCOLL_VERBOSE_CALL) {  \
            int device_ = 0;                                                                       \
            int rc_fast_ = GPUCOLL_SUCCESS;                                                        \
            if (NULL != m->host_gate)                                                              \
                rc_fast_ = gpucoll_host_gate_call(m->host_gate, at_a_, at_b_, (coll_id));          \
            if (GPUCOLL_SUCCESS == rc_fast_)                                                       \
                rc_fast_ = gpucoll_comm_host_call(                                                 \
                    m->uniform_memory ? NULL : m->core, gpucoll_user_buffer(at_a_),                \
                    gpucoll_user_buffer(at_b_), (coll_id), &device_);                              \
            if (GPUCOLL_REBIND == rc_fast_)                                                        \
                rc_fast_ = mca_coll_gpucoll_host_call_again(m, comm, gpucoll_user_buffer(at_a_),   \
                                                            gpucoll_user_buffer(at_b_), (coll_id), \
                                                            &device_);                             \
            if (GPUCOLL_DECLINED == rc_fast_) {                                                    \
                counted = true;                                                                    \
                goto delegate;                                                                     \
            }                                                                                      \
            if (GPUCOLL_SUCCESS != rc_fast_)                                                       \
                return mca_coll_gpucoll_core_error(gpucoll_coll_name(coll_id), rc_fast_);          \
            adev = 0 != (device_ & 1);                                                             \
            bdev = 0 != (device_ & 2);                                                             \
        } else {                                                                                   \
            adev = is_device(at_a_);                                                               \
            bdev = is_device(at_b_);                                                               \
        }                                                                                          \
    } while (0)

/* No device buffer on this rank: post the decline (peers may wait for it)
 * and go to the saved function, without describing the call. */
#define GPUCOLL_HOST_FAST_PATH(any_device, coll_id)                      \
    do {                                                                 \
        if (!(any_device)) {                                             \
            int rc_fast_ = mca_coll_gpucoll_decline(m, comm, (coll_id)); \
            if (OMPI_SUCCESS != rc_fast_) return rc_fast_;               \
            goto delegate;                                               \
        }                                                                \
    } while (0)

/* ---------------------------------------------------------------------------
 * Entry points. Each keeps only the host-buffer path (classify, decline,
 * call the saved function); a device buffer goes to its <coll>_device
 * function, out of line, so the entry saves few registers and stays short:
 * every host call of the application passes here.
 * ------------------------------------------------------------------------- */
#define GPUCOLL_DEVICE_PART __attribute__((noinline))

/* A device buffer on this rank: accelerated, else staged. */
GPUCOLL_DEVICE_PART static int allreduce_device(mca_coll_gpucoll_module_t* m,
                                                struct ompi_communicator_t* comm, bool sdev,
                                                bool rdev, const void* sbuf, void* rbuf,
                                                mca_coll_gpucoll_count_t count,
                                                struct ompi_datatype_t* dtype,
                                                struct ompi_op_t* op) {
    gpucoll_call_t call;
    const bool all =
        mca_coll_gpucoll_build_allreduce(&call, NULL, sdev, rdev, sbuf, rbuf, count, dtype, op);
    int rc = mca_coll_gpucoll_accelerate(m, comm, &call, all);
    if (OMPI_ERR_NOT_AVAILABLE != rc) return rc;
    return mca_coll_gpucoll_staged_allreduce(sbuf, rbuf, count, dtype, op, comm, m);
}

static int coll_gpucoll_allreduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                  struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                  struct ompi_communicator_t* comm,
                                  mca_coll_base_module_t* module) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
    bool counted = false;
    if (!mca_coll_gpucoll_in_host(m)) {
        bool sdev, rdev;
        GPUCOLL_CLASSIFY(mca_coll_gpucoll_data_at(sbuf, (size_t)count, dtype),
                         mca_coll_gpucoll_data_at(rbuf, (size_t)count, dtype),
                         GPUCOLL_COLL_ALLREDUCE, sdev, rdev);
        GPUCOLL_HOST_FAST_PATH(sdev || rdev, GPUCOLL_COLL_ALLREDUCE);
        return allreduce_device(m, comm, sdev, rdev, sbuf, rbuf, count, dtype, op);
    }
delegate:
    GPUCOLL_DELEGATE(m, allreduce, GPUCOLL_COLL_ALLREDUCE, counted, sbuf, rbuf, count, dtype, op,
                     comm);
}

GPUCOLL_DEVICE_PART static int bcast_device(mca_coll_gpucoll_module_t* m,
                                            struct ompi_communicator_t* comm, void* buf,
                                            mca_coll_gpucoll_count_t count,
                                            struct ompi_datatype_t* dtype, int root) {
    gpucoll_call_t call;
    const bool all = mca_coll_gpucoll_build_bcast(&call, NULL, true, buf, count, dtype, root);
    int rc = mca_coll_gpucoll_accelerate(m, comm, &call, all);
    if (OMPI_ERR_NOT_AVAILABLE != rc) return rc;
    return mca_coll_gpucoll_staged_bcast(buf, count, dtype, root, comm, m);
}

static int coll_gpucoll_bcast(void* buf, mca_coll_gpucoll_count_t count,
                              struct ompi_datatype_t* dtype, int root,
                              struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
    bool counted = false;
    if (!mca_coll_gpucoll_in_host(m)) {
        bool dev, unused;
        GPUCOLL_CLASSIFY(mca_coll_gpucoll_data_at(buf, (size_t)count, dtype), NULL,
                         GPUCOLL_COLL_BCAST, dev, unused);
        (void)unused;
        GPUCOLL_HOST_FAST_PATH(dev, GPUCOLL_COLL_BCAST);
        return bcast_device(m, comm, buf, count, dtype, root);
    }
delegate:
    GPUCOLL_DELEGATE(m, bcast, GPUCOLL_COLL_BCAST, counted, buf, count, dtype, root, comm);
}

GPUCOLL_DEVICE_PART static int allgather_device(
    mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm, bool sdev, bool rdev,
    const void* sbuf, mca_coll_gpucoll_count_t scount, struct ompi_datatype_t* sdtype, void* rbuf,
    mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* rdtype) {
    gpucoll_call_t call;
    const bool all = mca_coll_gpucoll_build_allgather(&call, NULL, sdev, rdev, sbuf, scount, sdtype,
                                                      rbuf, rcount, rdtype);
    int rc = mca_coll_gpucoll_accelerate(m, comm, &call, all);
    if (OMPI_ERR_NOT_AVAILABLE != rc) return rc;
    return mca_coll_gpucoll_staged_allgather(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, m);
}

static int coll_gpucoll_allgather(const void* sbuf, mca_coll_gpucoll_count_t scount,
                                  struct ompi_datatype_t* sdtype, void* rbuf,
                                  mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* rdtype,
                                  struct ompi_communicator_t* comm,
                                  mca_coll_base_module_t* module) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
    bool counted = false;
    if (!mca_coll_gpucoll_in_host(m)) {
        bool sdev, rdev;
        GPUCOLL_CLASSIFY(mca_coll_gpucoll_data_at(sbuf, (size_t)scount, sdtype),
                         mca_coll_gpucoll_data_at(rbuf, (size_t)rcount, rdtype),
                         GPUCOLL_COLL_ALLGATHER, sdev, rdev);
        GPUCOLL_HOST_FAST_PATH(sdev || rdev, GPUCOLL_COLL_ALLGATHER);
        return allgather_device(m, comm, sdev, rdev, sbuf, scount, sdtype, rbuf, rcount, rdtype);
    }
delegate:
    GPUCOLL_DELEGATE(m, allgather, GPUCOLL_COLL_ALLGATHER, counted, sbuf, scount, sdtype, rbuf,
                     rcount, rdtype, comm);
}

GPUCOLL_DEVICE_PART static int reduce_scatter_device(mca_coll_gpucoll_module_t* m,
                                                     struct ompi_communicator_t* comm, bool sdev,
                                                     bool rdev, const void* sbuf, void* rbuf,
                                                     mca_coll_gpucoll_counts_t rcounts,
                                                     struct ompi_datatype_t* dtype,
                                                     struct ompi_op_t* op) {
    int size = ompi_comm_size(comm), rc;
    size_t stack_counts[64];
    size_t* counts = size <= 64 ? stack_counts : malloc(sizeof(size_t) * (size_t)size);
    if (NULL == counts) return OMPI_ERR_OUT_OF_RESOURCE;
    gpucoll_call_t call;
    const bool all = mca_coll_gpucoll_build_reduce_scatter(&call, NULL, sdev, rdev, counts, sbuf,
                                                           rbuf, rcounts, dtype, op, comm);
    rc = mca_coll_gpucoll_accelerate(m, comm, &call, all);
    if (counts != stack_counts) free(counts);
    if (OMPI_ERR_NOT_AVAILABLE != rc) return rc;
    return mca_coll_gpucoll_staged_reduce_scatter(sbuf, rbuf, rcounts, dtype, op, comm, m);
}

static int coll_gpucoll_reduce_scatter(const void* sbuf, void* rbuf,
                                       mca_coll_gpucoll_counts_t rcounts,
                                       struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                       struct ompi_communicator_t* comm,
                                       mca_coll_base_module_t* module) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
    bool counted = false;
    if (!mca_coll_gpucoll_in_host(m)) {
        bool sdev, rdev;
        /* MPI_BOTTOM: where the first element would be (counts not summed here) */
        GPUCOLL_CLASSIFY(mca_coll_gpucoll_data_at(sbuf, 1, dtype),
                         mca_coll_gpucoll_data_at(rbuf, 1, dtype), GPUCOLL_COLL_REDUCE_SCATTER,
                         sdev, rdev);
        GPUCOLL_HOST_FAST_PATH(sdev || rdev, GPUCOLL_COLL_REDUCE_SCATTER);
        return reduce_scatter_device(m, comm, sdev, rdev, sbuf, rbuf, rcounts, dtype, op);
    }
delegate:
    GPUCOLL_DELEGATE(m, reduce_scatter, GPUCOLL_COLL_REDUCE_SCATTER, counted, sbuf, rbuf, rcounts,
                     dtype, op, comm);
}

GPUCOLL_DEVICE_PART static int reduce_scatter_block_device(
    mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm, bool sdev, bool rdev,
    const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* dtype,
    struct ompi_op_t* op) {
    gpucoll_call_t call;
    const bool all = mca_coll_gpucoll_build_reduce_scatter_block(&call, NULL, sdev, rdev, sbuf,
                                                                 rbuf, rcount, dtype, op);
    int rc = mca_coll_gpucoll_accelerate(m, comm, &call, all);
    if (OMPI_ERR_NOT_AVAILABLE != rc) return rc;
    return mca_coll_gpucoll_staged_reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm, m);
}

static int coll_gpucoll_reduce_scatter_block(const void* sbuf, void* rbuf,
                                             mca_coll_gpucoll_count_t rcount,
                                             struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                             struct ompi_communicator_t* comm,
                                             mca_coll_base_module_t* module) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
    bool counted = false;
    if (!mca_coll_gpucoll_in_host(m)) {
        bool sdev, rdev;
        GPUCOLL_CLASSIFY(mca_coll_gpucoll_data_at(sbuf, (size_t)rcount, dtype),
                         mca_coll_gpucoll_data_at(rbuf, (size_t)rcount, dtype),
                         GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, sdev, rdev);
        GPUCOLL_HOST_FAST_PATH(sdev || rdev, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK);
        return reduce_scatter_block_device(m, comm, sdev, rdev, sbuf, rbuf, rcount, dtype, op);
    }
delegate:
    GPUCOLL_DELEGATE(m, reduce_scatter_block, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, counted, sbuf,
                     rbuf, rcount, dtype, op, comm);
}

GPUCOLL_DEVICE_PART static int reduce_device(mca_coll_gpucoll_module_t* m,
                                             struct ompi_communicator_t* comm, bool sdev, bool rdev,
                                             bool at_root, const void* sbuf, void* rbuf,
                                             mca_coll_gpucoll_count_t count,
                                             struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                             int root) {
    gpucoll_call_t call;
    const bool all = mca_coll_gpucoll_build_reduce(&call, NULL, sdev, rdev, at_root, sbuf, rbuf,
                                                   count, dtype, op, root);
    int rc = mca_coll_gpucoll_accelerate(m, comm, &call, all);
    if (OMPI_ERR_NOT_AVAILABLE != rc) return rc;
    return mca_coll_gpucoll_staged_reduce(sbuf, rbuf, count, dtype, op, root, comm, m);
}

static int coll_gpucoll_reduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                               struct ompi_datatype_t* dtype, struct ompi_op_t* op, int root,
                               struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
    bool counted = false;
    if (!mca_coll_gpucoll_in_host(m)) {
        /* rbuf is significant only at the root; elsewhere it may be anything,
         * including a device pointer, which must not reach the host module.
         * Intercommunicators: MPI_ROOT receives, the other group sends,
         * MPI_PROC_NULL (the rest of the root's group) does neither. */
        const bool inter = OMPI_COMM_IS_INTER(comm);
        bool at_root = inter ? MPI_ROOT == root : ompi_comm_rank(comm) == root;
        bool sdev = is_device(mca_coll_gpucoll_data_at(sbuf, (size_t)count, dtype));
        bool rdev = (at_root || NULL != rbuf) &&
                    is_device(mca_coll_gpucoll_data_at(rbuf, (size_t)count, dtype));
        if (!at_root && rdev) {
            rbuf = NULL;
            rdev = false;
        }
        if (inter && root < 0 && sdev) { /* sbuf is not significant there either */
            sbuf = NULL;
            sdev = false;
        }
        GPUCOLL_HOST_FAST_PATH(sdev || rdev, GPUCOLL_COLL_REDUCE);
        return reduce_device(m, comm, sdev, rdev, at_root, sbuf, rbuf, count, dtype, op, root);
    }
delegate:
    GPUCOLL_DELEGATE(m, reduce, GPUCOLL_COLL_REDUCE, counted, sbuf, rbuf, count, dtype, op, root,
                     comm);
}

/* inoutbuf = inbuf op inoutbuf on the device, for two device buffers of a
 * predefined type and op. GPUCOLL_ERR_UNSUPPORTED: stage instead;
 * GPUCOLL_ERR_BUFFER: count elements do not fit a buffer's allocation
 * (nothing launched, nothing written). */
static int gpucoll_device_reduce_local(const void* inbuf, void* inoutbuf,
                                       mca_coll_gpucoll_count_t count,
                                       struct ompi_datatype_t* dtype, struct ompi_op_t* op) {
    gpucoll_dtype_t dt;
    gpucoll_op_t gop;
    if (!mca_coll_gpucoll_map_dtype(dtype, &dt) || !mca_coll_gpucoll_map_op(op, &gop) ||
        !gpucoll_op_valid(dt, gop)) {
        return GPUCOLL_ERR_UNSUPPORTED;
    }
    ptrdiff_t lo;
    size_t bytes;
    mca_coll_gpucoll_span((size_t)count, dtype, &lo, &bytes);
    int rc = gpucoll_check_span(inbuf, lo, bytes, "input buffer");
    if (GPUCOLL_SUCCESS == rc) rc = gpucoll_check_span(inoutbuf, lo, bytes, "inout buffer");
    if (GPUCOLL_SUCCESS != rc) return rc;
    rc = gpucoll_reduce(inoutbuf, inbuf, inoutbuf, (size_t)count, dt, gop);
    if (GPUCOLL_SUCCESS == rc) {
        gpucoll_counters_record(GPUCOLL_COLL_REDUCE_LOCAL, GPUCOLL_PATH_ACCELERATED, 0,
                                "device-reduce");
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL,
                        "reduce_local: device-reduce, %zu x %s, op %s", (size_t)count,
                        gpucoll_dtype_name(dt), gpucoll_op_name(gop));
    }
    return rc;
}

/* MPI_Reduce_local is not a collective: under MPI_THREAD_MULTIPLE threads
 * call it at once, through MPI_COMM_SELF's module, while another thread may
 * be inside a collective on MPI_COMM_SELF. So it neither reads nor moves the
 * module's host_depth (nothing in a saved algorithm calls it back through
 * c_coll): its buffers alone decide. */
static int coll_gpucoll_reduce_local(const void* inbuf, void* inoutbuf,
                                     mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                     struct ompi_op_t* op, mca_coll_base_module_t* module) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
    bool idev = is_device(mca_coll_gpucoll_data_at(inbuf, (size_t)count, dtype));
    bool iodev = is_device(mca_coll_gpucoll_data_at(inoutbuf, (size_t)count, dtype));
    if (idev && iodev) {
        int rc = gpucoll_device_reduce_local(inbuf, inoutbuf, count, dtype, op);
        if (GPUCOLL_SUCCESS == rc) return OMPI_SUCCESS;
        if (GPUCOLL_ERR_UNSUPPORTED != rc) {
            return mca_coll_gpucoll_core_error("reduce_local on the device", rc);
        }
    }
    if (idev || iodev) {
        return mca_coll_gpucoll_staged_reduce_local(inbuf, inoutbuf, count, dtype, op, m);
    }
    int rc = m->prev_reduce_local(inbuf, inoutbuf, count, dtype, op, m->prev_reduce_local_module);
    gpucoll_counters_record(GPUCOLL_COLL_REDUCE_LOCAL, GPUCOLL_PATH_DELEGATED, 0, "delegated");
    GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL, "reduce_local: host buffers, delegated");
    return rc;
}

/* The accelerated path of a communicator is set up (a blocking exchange
 * between its ranks) by its first blocking call of the accelerated set; a
 * nonblocking call must never wait for its peers, so one that comes first is
 * staged. Programs that make only nonblocking calls of the set (OSU's
 * osu_i* benchmarks, pipelined solvers) still synchronize with MPI_Barrier:
 * the first barrier after such a call sets the path up, and sets it up
 * again where such a call found its buffers on another GPU than the path's
 * (set up before the application chose its GPU). Every rank makes the same
 * collective calls on a communicator, so every rank does it at the same
 * barrier. */
static int coll_gpucoll_barrier(struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
    if (!mca_coll_gpucoll_in_host(m)) {
        if (m->nonblocking_seen && 0 == m->core_state) {
            mca_coll_gpucoll_accel_setup(m, comm);
        } else if (1 == m->core_state && NULL != m->core &&
                   GPUCOLL_REBIND == gpucoll_comm_settle(m->core)) {
            /* A nonblocking call found the core on another GPU than its
             * buffers (set up before the application chose its GPU): set up
             * again here, on every rank (each ended the same calls first). */
            (void)mca_coll_gpucoll_rebind(m, comm, "barrier");
        }
    }
    return m->prev_barrier(comm, m->prev_barrier_module);
}

/* ---------------------------------------------------------------------------
 * Module life cycle
 * ------------------------------------------------------------------------- */

/* comm->c_coll still holds the lower-priority functions here: keep each
 * (function, module) pair. A collective nobody below provides is not
 * intercepted either (its function pointer is cleared before Open MPI
 * copies ours). */
#define GPUCOLL_SAVE_ONE(field)                                                              \
    m->prev_##field = comm->c_coll->coll_##field;                                            \
    m->prev_##field##_module = comm->c_coll->coll_##field##_module;                          \
    if (NULL != m->prev_##field && NULL != m->prev_##field##_module) {                       \
        OBJ_RETAIN(m->prev_##field##_module);                                                \
    } else {                                                                                 \
        m->prev_##field = NULL;                                                              \
        m->prev_##field##_module = NULL;                                                     \
        m->super.coll_##field = NULL;                                                        \
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_SELECT,                                     \
                        "comm %s: no underlying " #field ", not intercepted", comm->c_name); \
    }

/* Open MPI 6.0: a module puts its entries into comm->c_coll itself (4.1 and
 * 5.0: the framework copies the module's non-NULL entries after enable), and
 * disable puts back what enable replaced. */
#define GPUCOLL_INSTALL_ONE(field)                          \
    if (NULL != m->super.coll_##field) {                    \
        comm->c_coll->coll_##field = m->super.coll_##field; \
        comm->c_coll->coll_##field##_module = &m->super;    \
    }
#define GPUCOLL_UNINSTALL_ONE(field)                                    \
    if (&m->super == comm->c_coll->coll_##field##_module) {             \
        comm->c_coll->coll_##field = m->prev_##field;                   \
        comm->c_coll->coll_##field##_module = m->prev_##field##_module; \
    }

/* Every entry the module keeps a saved (function, module) pair for: barrier,
 * the intercepted collectives, their nonblocking and persistent forms, and
 * the staged collectives in all three forms. GPUCOLL_EACH_ENTRY expands
 * GPUCOLL_ENTRY(field) once per entry: define GPUCOLL_ENTRY as the
 * per-entry macro right before a use, #undef it after. */
#define GPUCOLL_ENTRY_PREV(name, id) GPUCOLL_ENTRY(name)
#define GPUCOLL_ENTRY_FORMS(name, type, id) GPUCOLL_ENTRY(i##name) GPUCOLL_ENTRY(name##_init)
#define GPUCOLL_ENTRY_ALL(name, type, id) \
    GPUCOLL_ENTRY(name)                   \
    GPUCOLL_ENTRY_FORMS(name, type, id)
#define GPUCOLL_EACH_ENTRY                                    \
    GPUCOLL_ENTRY(barrier)                                    \
    MCA_COLL_GPUCOLL_FOREACH_INTERCEPTED(GPUCOLL_ENTRY_PREV)  \
    MCA_COLL_GPUCOLL_FOREACH_ACCEL_FORMS(GPUCOLL_ENTRY_FORMS) \
    MCA_COLL_GPUCOLL_FOREACH_STAGED(GPUCOLL_ENTRY_ALL)

#if MCA_COLL_GPUCOLL_INSTALLS_ITSELF
static int gpucoll_module_disable(mca_coll_base_module_t* module,
                                  struct ompi_communicator_t* comm) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
#define GPUCOLL_ENTRY GPUCOLL_UNINSTALL_ONE
    GPUCOLL_EACH_ENTRY
#undef GPUCOLL_ENTRY
    return OMPI_SUCCESS;
}
#endif

static int gpucoll_module_enable(mca_coll_base_module_t* module, struct ompi_communicator_t* comm) {
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;
#define GPUCOLL_ENTRY GPUCOLL_SAVE_ONE
    GPUCOLL_EACH_ENTRY
#undef GPUCOLL_ENTRY
#if MCA_COLL_GPUCOLL_INSTALLS_ITSELF
#define GPUCOLL_ENTRY GPUCOLL_INSTALL_ONE
    GPUCOLL_EACH_ENTRY
#undef GPUCOLL_ENTRY
#endif
    GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_SELECT, "comm %s (cid %u): enabled", comm->c_name,
                    mca_coll_gpucoll_comm_cid(comm));
    return OMPI_SUCCESS;
}

#define GPUCOLL_CLEAR_ONE(field) \
    m->prev_##field = NULL;      \
    m->prev_##field##_module = NULL;

static void gpucoll_module_construct(mca_coll_gpucoll_module_t* m) {
#define GPUCOLL_ENTRY GPUCOLL_CLEAR_ONE
    GPUCOLL_EACH_ENTRY
#undef GPUCOLL_ENTRY
    m->core = NULL;
    m->core_key = 0;
    m->core_state = 0;
    m->nonblocking_seen = false;
    m->uniform_memory = false;
    m->asserted_kinds = GPUCOLL_ASSERT_NONE;
    m->host_depth = 0;
    m->host_fast = false;
    m->host_gate = NULL;
    m->free_watched = false;
}

#define GPUCOLL_RELEASE_ONE(field)             \
    if (NULL != m->prev_##field##_module) {    \
        OBJ_RELEASE(m->prev_##field##_module); \
    }                                          \
    m->prev_##field = NULL;                    \
    m->prev_##field##_module = NULL;

static void gpucoll_module_destruct(mca_coll_gpucoll_module_t* m) {
    mca_coll_gpucoll_accel_release(m);
#define GPUCOLL_ENTRY GPUCOLL_RELEASE_ONE
    GPUCOLL_EACH_ENTRY
#undef GPUCOLL_ENTRY
}

OBJ_CLASS_INSTANCE(mca_coll_gpucoll_module_t, mca_coll_base_module_t, gpucoll_module_construct,
                   gpucoll_module_destruct);

#define GPUCOLL_INSTALL(name, id) m->super.coll_##name = coll_gpucoll_##name;

mca_coll_gpucoll_module_t* mca_coll_gpucoll_module_new(struct ompi_communicator_t* comm) {
    (void)comm;
    mca_coll_gpucoll_module_t* m = OBJ_NEW(mca_coll_gpucoll_module_t);
    if (NULL == m) return NULL;
    m->super.coll_module_enable = gpucoll_module_enable;
#if MCA_COLL_GPUCOLL_INSTALLS_ITSELF
    m->super.coll_module_disable = gpucoll_module_disable;
#endif
    MCA_COLL_GPUCOLL_FOREACH_INTERCEPTED(GPUCOLL_INSTALL)
    m->super.coll_barrier = coll_gpucoll_barrier;
    mca_coll_gpucoll_install_forms(m);
    return m;
}

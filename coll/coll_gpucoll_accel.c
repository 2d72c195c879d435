/*
 * coll_gpucoll_accel.c - the accelerated (device-to-device) path of a
 * communicator: creating the core's communicator at the first call, the
 * bootstrap it runs on (the saved host allgather and barrier), and the hand-
 * off of each call.
 *
 * Agreement: unless the user asserted uniform memory kinds, every top-level
 * call goes to gpucoll_comm_run, host buffers included (a host rank only
 * posts "decline" and returns at once), so that device ranks never wait for
 * a rank that took another path. The core answers GPUCOLL_DECLINED on every
 * rank or on none.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_gpucoll.h"
#include "opal/util/info.h"

/* ---------------------------------------------------------------------------
 * Bootstrap: the core's view of the job, on the saved host module
 * ------------------------------------------------------------------------- */

typedef struct gpucoll_bootstrap_ctx {
    mca_coll_gpucoll_module_t* m;
    struct ompi_communicator_t* comm;
} gpucoll_bootstrap_ctx_t;

static int gpucoll_bootstrap_allgather(void* ctx, const void* send, void* recv, size_t bytes) {
    gpucoll_bootstrap_ctx_t* b = (gpucoll_bootstrap_ctx_t*)ctx;
    mca_coll_gpucoll_enter_host(b->m);
    int rc = b->m->prev_allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, b->comm,
                                  b->m->prev_allgather_module);
    mca_coll_gpucoll_leave_host(b->m);
    return OMPI_SUCCESS == rc ? 0 : -1;
}

static int gpucoll_bootstrap_barrier(void* ctx) {
    gpucoll_bootstrap_ctx_t* b = (gpucoll_bootstrap_ctx_t*)ctx;
    mca_coll_gpucoll_enter_host(b->m);
    int rc = NULL != b->m->prev_barrier
                 ? b->m->prev_barrier(b->comm, b->m->prev_barrier_module)
                 : b->comm->c_coll->coll_barrier(b->comm, b->comm->c_coll->coll_barrier_module);
    mca_coll_gpucoll_leave_host(b->m);
    return OMPI_SUCCESS == rc ? 0 : -1;
}

static void gpucoll_core_log(int level, const char* message) {
    if (0 == level) {
        opal_output(0, "coll:gpucoll %s: %s", OPAL_NAME_PRINT(OPAL_PROC_MY_NAME), message);
    } else {
        GPUCOLL_VERBOSE(level, "%s", message);
    }
}

/* While the core waits for peers, Open MPI's own communication must go on: a
 * peer may be blocked in a send that needs this process's progress. */
static void gpucoll_core_progress(void) {
    /* From inside our own progress function (a nonblocking call running):
     * Open MPI's progress is not re-entrant. */
    if (!mca_coll_gpucoll_in_progress_callback) opal_progress();
}

/* MPI 4.1 info key: a list of memory kinds ("system", "mpi", "cuda:device",
 * ...) the application promises to restrict itself to on this communicator.
 * Only device-memory kinds ("<kind>:device"), or only host kinds ("system",
 * "mpi"): every call passes the same kind on every rank, and no agreement is
 * needed. A bare "cuda" (host, device and managed memory), "cuda:host" or
 * "cuda:managed" may mix with device memory: the agreement stays. */
static int gpucoll_info_asserted_kinds(struct ompi_communicator_t* comm) {
    char value[256];
    int flag = 0;
    if (NULL == comm->super.s_info ||
        OPAL_SUCCESS != mca_coll_gpucoll_info_get(comm->super.s_info,
                                                  "mpi_assert_memory_alloc_kinds", value,
                                                  sizeof value, &flag) ||
        !flag) {
        return GPUCOLL_ASSERT_NONE;
    }
    int host = 0, device = 0, mixed = 0;
    for (char *save = NULL, *kind = strtok_r(value, ",", &save); NULL != kind;
         kind = strtok_r(NULL, ",", &save)) {
        while (' ' == *kind) ++kind;
        size_t len = strlen(kind);
        while (len > 0 && ' ' == kind[len - 1]) kind[--len] = '\0';
        const char* colon = strchr(kind, ':');
        if (0 == strncmp(kind, "system", 6) || 0 == strncmp(kind, "mpi", 3)) {
            ++host;
        } else if (NULL != colon && 0 == strcmp(colon, ":device")) {
            ++device;
        } else {
            ++mixed;
        }
    }
    if (0 != mixed || (host > 0) == (device > 0)) return GPUCOLL_ASSERT_NONE;
    return device > 0 ? GPUCOLL_ASSERT_DEVICE_ONLY : GPUCOLL_ASSERT_HOST_ONLY;
}

/* MPI_Comm_free runs attribute delete callbacks on every rank while the
 * communicator still works, before Open MPI releases it: the core's teardown
 * (a handshake with every peer) happens there, at a point every rank reaches
 * together. Requests that retain the communicator (nonblocking, persistent)
 * may delay its destruction to a point that differs between ranks; a
 * handshake there could wait for a peer that waits for us elsewhere. Calls
 * after that (a persistent request started after MPI_Comm_free) are staged. */
static int gpucoll_keyval = MPI_KEYVAL_INVALID;

static int gpucoll_comm_freed(MPI_Comm comm, int keyval, void* value, void* extra) {
    (void)comm;
    (void)keyval;
    (void)extra;
    mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)value;
    mca_coll_gpucoll_accel_release(m); /* ends queued calls, then the handshake */
    m->core_state = -1;                /* staging only from now on */
    return MPI_SUCCESS;
}

/* Arranges for gpucoll_comm_freed at MPI_Comm_free of comm. */
static void gpucoll_watch_free(mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm) {
    /* Once: setting the attribute again would run gpucoll_comm_freed on the
     * old value, tearing down the core just created (a core set up again). */
    if (m->free_watched) return;
    m->free_watched = true;
    if (MPI_KEYVAL_INVALID == gpucoll_keyval &&
        MPI_SUCCESS != PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, gpucoll_comm_freed,
                                               &gpucoll_keyval, NULL)) {
        gpucoll_keyval = MPI_KEYVAL_INVALID;
        return; /* the module's destruction tears down instead */
    }
    PMPI_Comm_set_attr(comm, gpucoll_keyval, m);
}

static gpucoll_comm_t* gpucoll_core(mca_coll_gpucoll_module_t* m,
                                    struct ompi_communicator_t* comm) {
    if (0 != m->core_state) return m->core;
    mca_coll_gpucoll_component_t* c = &mca_coll_gpucoll_component;
    m->core_state = -1;
    if (NULL == m->prev_allgather) return NULL;

    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    for (int i = 0; i < GPUCOLL_COLL_COUNT; ++i) {
        config.algorithm[i] = (gpucoll_algorithm_t)c->algorithm[i];
    }
    config.one_shot_max_bytes = c->one_shot_max;
    config.one_kernel_max_bytes = c->one_kernel_max;
    config.chain_min_bytes = c->chain_min;
    config.chunk_bytes = c->chunk_size;
    config.ipc_cache_entries = c->ipc_cache_size > 0 ? (size_t)c->ipc_cache_size : 1;
    config.ipc_cache_bytes = c->ipc_cache_bytes;
    config.verbose = c->verbose;
    config.log = gpucoll_core_log;
    config.progress = gpucoll_core_progress;
    /* Only host kinds asserted: host calls skip the core (a device buffer
     * there is staged, joining the others on the host path). Only device
     * kinds asserted: host calls still post their decline, since Open MPI's
     * own collectives on this communicator (inside MPI_Comm_split, ...) pass
     * host memory, and a rank that breaks the assertion must not leave the
     * others waiting; such calls run staged, correct. */
    m->asserted_kinds = gpucoll_info_asserted_kinds(comm);
    m->uniform_memory = c->uniform_memory || GPUCOLL_ASSERT_HOST_ONLY == m->asserted_kinds;
    config.uniform_memory = m->uniform_memory;
    config.device_flags = c->device_flags;
    config.host_pipeline = c->host_pipeline;
    config.progress_thread = c->progress_thread;
    config.inter_algorithm = c->inter_algorithm;
    config.inter_chunk_bytes = c->inter_chunk_size;
    config.inter_direct_max_bytes = c->inter_direct_max;
    config.inter_device_memory = c->inter_device_memory;
    config.inter_bcast = c->inter_bcast;
    config.thread_multiple = c->thread_multiple;
    config.topology_file = c->topology_file;
    config.nvlink_file = c->nvlink_file;
    config.cost_model = c->cost_model;
    config.selection_file = c->selection_file;
    config.rails = c->rails ? 1 : 0;
    config.rail_devices = c->rail_devices;
    config.wait_warning_s = c->wait_warning;
    config.max_comms = c->max_comms;
    config.peer_timeout_s = c->peer_timeout;

    gpucoll_bootstrap_ctx_t ctx = {m, comm};
    gpucoll_bootstrap_t bs = {&ctx, ompi_comm_rank(comm), ompi_comm_size(comm),
                              gpucoll_bootstrap_allgather, gpucoll_bootstrap_barrier};
    int rc = gpucoll_comm_create(&bs, &config, &m->core);
    if (GPUCOLL_SUCCESS != rc) {
        mca_coll_gpucoll_core_error("creating the accelerated path", rc);
        m->core = NULL;
    }
    m->core_state = NULL != m->core ? 1 : -1;
    /* libgpucoll_mpix finds the core of a stream communicator by its handle. */
    if (NULL != m->core) {
        m->core_key = (uint64_t)(uintptr_t)comm;
        gpucoll_comm_register_key(m->core_key, m->core);
    }
    /* coll_gpucoll_uniform_memory on one node: a host call's decline is a
     * store to shared memory (no measurable cost), while skipping it would
     * leave device ranks waiting forever for a rank that breaks the
     * assertion. Host calls keep posting it there; between nodes, where it
     * is a message, the assertion removes it. The same on every rank. */
    if (NULL != m->core && c->uniform_memory && GPUCOLL_ASSERT_HOST_ONLY != m->asserted_kinds &&
        gpucoll_comm_single_node(m->core))
        m->uniform_memory = false;
    if (NULL != m->core && comm != MPI_COMM_WORLD && comm != MPI_COMM_SELF)
        gpucoll_watch_free(m, comm);
    /* From now on host calls take the gate, else gpucoll_comm_host_call. */
    m->host_gate = NULL != m->core && !m->uniform_memory
                       ? gpucoll_comm_host_gate(m->core, GPUCOLL_HOST_GATE_VERSION,
                                                sizeof(gpucoll_host_gate_t))
                       : NULL;
    m->host_fast = true;
    GPUCOLL_VERBOSE(
        MCA_COLL_GPUCOLL_VERBOSE_SELECT, "comm %s (cid %u): accelerated path %s%s", comm->c_name,
        mca_coll_gpucoll_comm_cid(comm), NULL != m->core ? "on" : "off (staging only)",
        m->uniform_memory                      ? ", uniform memory asserted"
        : c->uniform_memory && NULL != m->core ? ", uniform memory asserted (unused on one node)"
                                               : "");
    return m->core;
}

void mca_coll_gpucoll_accel_setup(mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm) {
    if (!OMPI_COMM_IS_INTER(comm)) (void)gpucoll_core(m, comm);
}

void mca_coll_gpucoll_accel_release(mca_coll_gpucoll_module_t* m) {
    if (0 != m->core_key) gpucoll_comm_forget_key(m->core_key);
    m->core_key = 0;
    if (NULL != m->core) gpucoll_comm_destroy(m->core);
    m->core = NULL;
    m->core_state = 0;
    m->host_gate = NULL;
    m->host_fast = false; /* host calls see the core created again, if ever */
}

/* The core answered GPUCOLL_REBIND at a blocking call (or barrier): a
 * rank's buffers in this call, or in a nonblocking call before it, are on
 * another GPU than the one the core was set up on (before the application
 * chose its GPU). Every rank gets the same answer in this call, after the
 * calls started before it ended, so all set the core up again here, on the
 * GPU of those buffers. */
gpucoll_comm_t* mca_coll_gpucoll_rebind(mca_coll_gpucoll_module_t* m,
                                        struct ompi_communicator_t* comm, const char* where) {
    GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_SELECT,
                    "comm %s: buffers on another GPU than the one the accelerated path was set up "
                    "on (in this %s or a nonblocking call before it); setting it up again",
                    comm->c_name, where);
    mca_coll_gpucoll_accel_release(m);
    return gpucoll_core(m, comm);
}

int mca_coll_gpucoll_host_call_again(mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm,
                                     const void* a, const void* b, gpucoll_coll_t coll,
                                     int* device) {
    (void)mca_coll_gpucoll_rebind(m, comm, gpucoll_coll_name(coll));
    return gpucoll_comm_host_call(m->uniform_memory ? NULL : m->core, a, b, coll, device);
}

/* ---------------------------------------------------------------------------
 * Calls
 * ------------------------------------------------------------------------- */

void mca_coll_gpucoll_describe_reduction(gpucoll_call_t* call, struct ompi_datatype_t* dtype,
                                         struct ompi_op_t* op) {
    call->eligible = mca_coll_gpucoll_map_dtype(dtype, &call->dtype) &&
                     mca_coll_gpucoll_map_op(op, &call->op) &&
                     gpucoll_op_valid(call->dtype, call->op);
    if (!call->eligible) {
        /* Still the same bytes as the other ranks describe: the core's
         * size-based decisions must not differ between ranks. */
        size_t size = 0;
        ompi_datatype_type_size(dtype, &size);
        call->dtype = GPUCOLL_BYTE;
        call->count *= size;
        call->op = GPUCOLL_OP_BOR;
    }
}

void mca_coll_gpucoll_describe_bytes(gpucoll_call_t* call, size_t count,
                                     struct ompi_datatype_t* dtype) {
    ptrdiff_t lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    size_t size = 0;
    ompi_datatype_type_size(dtype, &size);
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
    call->dtype = GPUCOLL_BYTE;
    call->count = count * size;
    /* Packed contiguous bytes starting at the buffer (no padding between
     * elements, which allgather's blocks would otherwise lose): anything else
     * is staged. */
    call->eligible = 0 == true_lb && 0 == lb && extent == (ptrdiff_t)size &&
                     mca_coll_gpucoll_contiguous(dtype, count);
}

/* ---------------------------------------------------------------------------
 * The call each collective hands the core (blocking and nonblocking alike)
 * ------------------------------------------------------------------------- */

/* Every buffer of this rank that the call uses is device memory. */
static inline bool gpucoll_all_device(const void* sbuf, bool sdev, bool rdev) {
    return (MPI_IN_PLACE == sbuf || sdev) && rdev;
}

static inline const void* gpucoll_send_of(const void* sbuf) {
    return MPI_IN_PLACE == sbuf ? NULL : sbuf;
}

bool mca_coll_gpucoll_build_allreduce(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a, bool sdev,
                                      bool rdev, const void* sbuf, void* rbuf,
                                      mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                      struct ompi_op_t* op) {
    *call = (gpucoll_call_t){.coll = GPUCOLL_COLL_ALLREDUCE,
                             .sendbuf = gpucoll_send_of(sbuf),
                             .recvbuf = rbuf,
                             .count = (size_t)count};
    mca_coll_gpucoll_describe_reduction(call, dtype, op);
    if (NULL != a) *a = (mca_coll_gpucoll_args_t){.count = count, .dtype = dtype, .op = op};
    return gpucoll_all_device(sbuf, sdev, rdev);
}

bool mca_coll_gpucoll_build_bcast(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a, bool dev,
                                  void* buf, mca_coll_gpucoll_count_t count,
                                  struct ompi_datatype_t* dtype, int root) {
    *call = (gpucoll_call_t){.coll = GPUCOLL_COLL_BCAST, .recvbuf = buf, .root = root};
    mca_coll_gpucoll_describe_bytes(call, (size_t)count, dtype);
    if (NULL != a) *a = (mca_coll_gpucoll_args_t){.count = count, .dtype = dtype, .root = root};
    return dev;
}

bool mca_coll_gpucoll_build_allgather(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a, bool sdev,
                                      bool rdev, const void* sbuf, mca_coll_gpucoll_count_t scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf,
                                      mca_coll_gpucoll_count_t rcount,
                                      struct ompi_datatype_t* rdtype) {
    *call = (gpucoll_call_t){
        .coll = GPUCOLL_COLL_ALLGATHER, .sendbuf = gpucoll_send_of(sbuf), .recvbuf = rbuf};
    mca_coll_gpucoll_describe_bytes(call, (size_t)rcount, rdtype);
    /* The send side must be the same contiguous bytes; MPI_BOTTOM (NULL)
     * never reads as in place: its type's true lb is an address. */
    if (MPI_IN_PLACE != sbuf) {
        gpucoll_call_t send = *call;
        mca_coll_gpucoll_describe_bytes(&send, (size_t)scount, sdtype);
        call->eligible = call->eligible && send.eligible && send.count == call->count;
    }
    if (NULL != a)
        *a = (mca_coll_gpucoll_args_t){
            .count = rcount, .dtype = rdtype, .scount = scount, .sdtype = sdtype};
    return gpucoll_all_device(sbuf, sdev, rdev);
}

bool mca_coll_gpucoll_build_reduce_scatter(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a,
                                           bool sdev, bool rdev, size_t* counts, const void* sbuf,
                                           void* rbuf, mca_coll_gpucoll_counts_t rcounts,
                                           struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                           struct ompi_communicator_t* comm) {
    const int size = ompi_comm_size(comm);
    for (int i = 0; i < size; ++i) counts[i] = mca_coll_gpucoll_count_at(rcounts, (size_t)i);
    *call = (gpucoll_call_t){.coll = GPUCOLL_COLL_REDUCE_SCATTER,
                             .sendbuf = gpucoll_send_of(sbuf),
                             .recvbuf = rbuf,
                             .counts = counts};
    mca_coll_gpucoll_describe_reduction(call, dtype, op);
    if (!call->eligible) { /* counts in bytes, as the call now describes bytes */
        size_t tsize = 0;
        ompi_datatype_type_size(dtype, &tsize);
        for (int i = 0; i < size; ++i) counts[i] *= tsize;
    }
    if (NULL != a) {
        a->rcounts = rcounts;
        a->dtype = dtype;
        a->op = op;
    }
    /* A zero block out of place: the receive buffer is not used at all. */
    const bool rsig = MPI_IN_PLACE == sbuf ||
                      mca_coll_gpucoll_count_at(rcounts, (size_t)ompi_comm_rank(comm)) > 0;
    return gpucoll_all_device(sbuf, sdev, rsig ? rdev : true);
}

bool mca_coll_gpucoll_build_reduce_scatter_block(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a,
                                                 bool sdev, bool rdev, const void* sbuf, void* rbuf,
                                                 mca_coll_gpucoll_count_t rcount,
                                                 struct ompi_datatype_t* dtype,
                                                 struct ompi_op_t* op) {
    *call = (gpucoll_call_t){.coll = GPUCOLL_COLL_REDUCE_SCATTER_BLOCK,
                             .sendbuf = gpucoll_send_of(sbuf),
                             .recvbuf = rbuf,
                             .count = (size_t)rcount};
    mca_coll_gpucoll_describe_reduction(call, dtype, op);
    if (NULL != a) *a = (mca_coll_gpucoll_args_t){.count = rcount, .dtype = dtype, .op = op};
    return gpucoll_all_device(sbuf, sdev, rdev);
}

bool mca_coll_gpucoll_build_reduce(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a, bool sdev,
                                   bool rdev, bool at_root, const void* sbuf, void* rbuf,
                                   mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                   struct ompi_op_t* op, int root) {
    *call = (gpucoll_call_t){.coll = GPUCOLL_COLL_REDUCE,
                             .sendbuf = gpucoll_send_of(sbuf),
                             .recvbuf = at_root ? rbuf : NULL,
                             .count = (size_t)count,
                             .root = root};
    mca_coll_gpucoll_describe_reduction(call, dtype, op);
    if (NULL != a)
        *a = (mca_coll_gpucoll_args_t){.count = count, .dtype = dtype, .op = op, .root = root};
    return gpucoll_all_device(sbuf, sdev, at_root ? rdev : true);
}

int mca_coll_gpucoll_decline(mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm,
                             gpucoll_coll_t coll) {
    if (OMPI_COMM_IS_INTER(comm)) return OMPI_SUCCESS;
    gpucoll_comm_t* core = gpucoll_core(m, comm); /* created at the first call, on every rank */
    if (NULL == core || m->uniform_memory) return OMPI_SUCCESS; /* host calls skip the core */
    int rc = gpucoll_comm_decline(core);
    if (GPUCOLL_REBIND == rc) {
        core = mca_coll_gpucoll_rebind(m, comm, gpucoll_coll_name(coll));
        rc = NULL != core ? gpucoll_comm_decline(core) : GPUCOLL_DECLINED;
    }
    if (GPUCOLL_DECLINED == rc) return OMPI_SUCCESS;
    return mca_coll_gpucoll_core_error(gpucoll_coll_name(coll), rc);
}

int mca_coll_gpucoll_accelerate(mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm,
                                gpucoll_call_t* call, bool all_device) {
    if (OMPI_COMM_IS_INTER(comm)) return OMPI_ERR_NOT_AVAILABLE; /* staged or delegated */
    gpucoll_comm_t* core = gpucoll_core(m, comm);
    if (NULL == core) return OMPI_ERR_NOT_AVAILABLE;
    if (GPUCOLL_ASSERT_HOST_ONLY == m->asserted_kinds) {
        /* The others skip the core (host memory asserted): join them on the
         * host path, staged. Correct, and no hang. */
        GPUCOLL_ERROR(
            "comm %s: device memory passed to %s on a communicator whose info key "
            "mpi_assert_memory_alloc_kinds lists only host kinds; staged",
            comm->c_name, gpucoll_coll_name(call->coll));
        return OMPI_ERR_NOT_AVAILABLE;
    }
    call->eligible = call->eligible && all_device;
    call->on_device = all_device;
    int rc = gpucoll_comm_run(core, call);
    if (GPUCOLL_REBIND == rc) {
        /* Set up again on every rank, then the call runs there. Once: a
         * second answer stages the call. */
        core = mca_coll_gpucoll_rebind(m, comm, gpucoll_coll_name(call->coll));
        if (NULL == core) return OMPI_ERR_NOT_AVAILABLE;
        rc = gpucoll_comm_run(core, call);
        if (GPUCOLL_REBIND == rc) rc = GPUCOLL_DECLINED; /* the same answer on every rank */
    }
    if (GPUCOLL_SUCCESS == rc) return OMPI_SUCCESS;
    if (GPUCOLL_DECLINED == rc) return OMPI_ERR_NOT_AVAILABLE;
    return mca_coll_gpucoll_core_error(gpucoll_coll_name(call->coll), rc);
}

/*
 * coll_gpucoll_nonblocking.c - nonblocking allreduce, bcast, allgather,
 * reduce_scatter(_block) and reduce on the accelerated path.
 *
 * The initiating call never waits for a peer: it starts the call in the
 * core (gpucoll_comm_start: posted now, or queued behind this rank's
 * earlier calls) and returns a request. A progress function registered with
 * Open MPI advances the core's queue; a call runs once every rank's post is
 * visible and its request completes when it ends.
 *
 * Ranks that pass host memory post their decline (gpucoll_comm_start_decline)
 * and hand the call to the saved module at once. When a call is declined
 * (some rank passed host memory or an ineligible call), the device ranks
 * learn it later, in progress; they then run the saved module's nonblocking
 * call on host copies, as the others did when they started it. Open MPI's
 * libnbc gives each nonblocking call on a communicator the next tag at
 * initiation, the same on every rank: an accelerated start reserves that tag
 * (every rank takes one per nonblocking call, whichever path it takes), and
 * the late start uses it, so it matches the peers' early ones.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpucoll.h"
#include "ompi/mca/coll/base/coll_tags.h"

#define GPUCOLL_UNPACK(...) __VA_ARGS__

/* ---------------------------------------------------------------------------
 * Tags: Open MPI's ompi_coll_base_nbc_reserve_tags(comm, 1), which libnbc
 * calls once per nonblocking call (coll_base_util.h; not includable here,
 * see coll_gpucoll.h).
 * ------------------------------------------------------------------------- */

static int32_t gpucoll_reserve_nbc_tag(struct ompi_communicator_t* comm) {
    int32_t tag, old_tag;
    do {
        tag = old_tag = comm->c_nbc_tag;
        if ((tag - 1) < MCA_COLL_BASE_TAG_NONBLOCKING_END) tag = MCA_COLL_BASE_TAG_NONBLOCKING_BASE;
    } while (!OPAL_ATOMIC_COMPARE_EXCHANGE_STRONG_32(&comm->c_nbc_tag, &old_tag, tag - 1));
    return tag;
}

/* ---------------------------------------------------------------------------
 * Requests in flight on the accelerated path, advanced by our progress
 * function (one list for the process; MPI_THREAD_MULTIPLE: a try-lock).
 * ------------------------------------------------------------------------- */

static mca_coll_gpucoll_request_t* gpucoll_active;
static bool gpucoll_progress_registered;
static atomic_flag gpucoll_active_lock = ATOMIC_FLAG_INIT;
/* Inside our progress function: the core's waits must not call opal_progress
 * (Open MPI's progress is not re-entrant). */
bool mca_coll_gpucoll_in_progress_callback;

/* The saved module's nonblocking call (persistent: its _init) of r's
 * collective on r's host copies, under the libnbc tag r reserved. */
static int gpucoll_saved_call(mca_coll_gpucoll_request_t* r, bool persistent,
                              ompi_request_t** inner) {
    mca_coll_gpucoll_module_t* m = r->module;
    struct ompi_communicator_t* comm = r->comm;
    const mca_coll_gpucoll_args_t* a = &r->args;
    char* s0 = r->staging.buf[0].host;
    char* s1 = r->staging.buf[1].host;
    struct ompi_info_t* info = &ompi_mpi_info_null.info;
    int rc;
    const int32_t tag = comm->c_nbc_tag;
    comm->c_nbc_tag = r->nbc_tag; /* the saved module takes it */
    mca_coll_gpucoll_enter_host(m);
    switch (r->staging.coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            rc = persistent ? m->prev_allreduce_init(s0, s1, a->count, a->dtype, a->op, comm, info,
                                                     inner, m->prev_allreduce_init_module)
                            : m->prev_iallreduce(s0, s1, a->count, a->dtype, a->op, comm, inner,
                                                 m->prev_iallreduce_module);
            break;
        case GPUCOLL_COLL_BCAST:
            rc = persistent ? m->prev_bcast_init(s0, a->count, a->dtype, a->root, comm, info, inner,
                                                 m->prev_bcast_init_module)
                            : m->prev_ibcast(s0, a->count, a->dtype, a->root, comm, inner,
                                             m->prev_ibcast_module);
            break;
        case GPUCOLL_COLL_ALLGATHER:
            rc = persistent
                     ? m->prev_allgather_init(s0, a->scount, a->sdtype, s1, a->count, a->dtype,
                                              comm, info, inner, m->prev_allgather_init_module)
                     : m->prev_iallgather(s0, a->scount, a->sdtype, s1, a->count, a->dtype, comm,
                                          inner, m->prev_iallgather_module);
            break;
        case GPUCOLL_COLL_REDUCE_SCATTER:
            rc = persistent
                     ? m->prev_reduce_scatter_init(s0, s1, a->rcounts, a->dtype, a->op, comm, info,
                                                   inner, m->prev_reduce_scatter_init_module)
                     : m->prev_ireduce_scatter(s0, s1, a->rcounts, a->dtype, a->op, comm, inner,
                                               m->prev_ireduce_scatter_module);
            break;
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
            rc = persistent
                     ? m->prev_reduce_scatter_block_init(s0, s1, a->count, a->dtype, a->op, comm,
                                                         info, inner,
                                                         m->prev_reduce_scatter_block_init_module)
                     : m->prev_ireduce_scatter_block(s0, s1, a->count, a->dtype, a->op, comm, inner,
                                                     m->prev_ireduce_scatter_block_module);
            break;
        case GPUCOLL_COLL_REDUCE:
            rc = persistent ? m->prev_reduce_init(s0, s1, a->count, a->dtype, a->op, a->root, comm,
                                                  info, inner, m->prev_reduce_init_module)
                            : m->prev_ireduce(s0, s1, a->count, a->dtype, a->op, a->root, comm,
                                              inner, m->prev_ireduce_module);
            break;
        default:
            rc = OMPI_ERR_NOT_SUPPORTED;
    }
    mca_coll_gpucoll_leave_host(m);
    comm->c_nbc_tag = tag;
    return rc;
}

/* The call was declined on every rank: the saved module's nonblocking call
 * on host copies, as the other ranks started it. */
static int gpucoll_start_declined(mca_coll_gpucoll_request_t* r) {
    mca_coll_gpucoll_staging_t* st = &r->staging;
    int rc = mca_coll_gpucoll_staging_alloc(st, false);
    if (OMPI_SUCCESS == rc) rc = mca_coll_gpucoll_staging_copy_in(st);
    if (OMPI_SUCCESS != rc) return rc;
    mca_coll_gpucoll_staging_record(st, GPUCOLL_FORM_NONBLOCKING);
    ompi_request_t* inner = NULL;
    if (OMPI_SUCCESS != (rc = gpucoll_saved_call(r, false, &inner))) return rc;
    mca_coll_gpucoll_request_attach(r, inner);
    return OMPI_SUCCESS;
}

/* A start of a persistent request declined on every rank: the saved
 * module's persistent request on pinned host copies, made at the first such
 * start under the tag reserved at init (where the other ranks' saved module
 * took it), then started like theirs. */
static int gpucoll_start_declined_persistent(mca_coll_gpucoll_request_t* r) {
    if (NULL == r->inner) {
        /* A start whose saved call could not be made left its buffers. */
        mca_coll_gpucoll_staging_free(&r->staging);
        int rc = mca_coll_gpucoll_staging_alloc(&r->staging, false);
        if (OMPI_SUCCESS == rc) rc = gpucoll_saved_call(r, true, &r->inner);
        if (OMPI_SUCCESS != rc) return rc;
    }
    return mca_coll_gpucoll_request_restart_inner(r);
}

/* r's call ended in the core with status: complete r, or start it declined. */
static void gpucoll_conclude(mca_coll_gpucoll_request_t* r, int status) {
    gpucoll_pending_free(r->pending);
    r->pending = NULL;
    int rc = OMPI_SUCCESS;
    if (GPUCOLL_DECLINED == status) {
        rc = r->super.super.req_persistent ? gpucoll_start_declined_persistent(r)
                                           : gpucoll_start_declined(r);
        if (OMPI_SUCCESS == rc) return; /* completes with the saved module's request */
    } else if (GPUCOLL_SUCCESS != status) {
        rc = mca_coll_gpucoll_core_error(gpucoll_coll_name(r->staging.coll), status);
    }
    mca_coll_gpucoll_request_complete(r, rc);
}

/* Tests r's call once; true when r left the accelerated path. */
static bool gpucoll_test_one(mca_coll_gpucoll_request_t* r) {
    int done = 0;
    const int status = gpucoll_pending_test(r->pending, &done);
    if (!done) return false;
    gpucoll_conclude(r, status);
    return true;
}

static int gpucoll_nonblocking_progress(void) {
    if (NULL == gpucoll_active || mca_coll_gpucoll_in_progress_callback) return 0;
    if (atomic_flag_test_and_set_explicit(&gpucoll_active_lock, memory_order_acquire))
        return 0; /* another thread is at it */
    mca_coll_gpucoll_in_progress_callback = true;
    int events = 0;
    for (mca_coll_gpucoll_request_t **at = &gpucoll_active, *r; NULL != (r = *at);) {
        if (gpucoll_test_one(r)) {
            *at = r->next;
            r->next = NULL;
            ++events;
        } else {
            at = &r->next;
        }
    }
    mca_coll_gpucoll_in_progress_callback = false;
    atomic_flag_clear_explicit(&gpucoll_active_lock, memory_order_release);
    return events;
}

void mca_coll_gpucoll_nonblocking_fini(void) {
    if (gpucoll_progress_registered) opal_progress_unregister(gpucoll_nonblocking_progress);
    gpucoll_progress_registered = false;
}

/* ---------------------------------------------------------------------------
 * Starting a call
 * ------------------------------------------------------------------------- */

/* The core of m when nonblocking calls on comm go through it: created
 * already, an intracommunicator, on one node or with the progress thread
 * (between nodes), device memory not ruled out by an info assertion, not
 * MPI_THREAD_MULTIPLE. */
gpucoll_comm_t* mca_coll_gpucoll_nonblocking_core(mca_coll_gpucoll_module_t* m,
                                                  struct ompi_communicator_t* comm) {
    /* The core is created collectively (a blocking allgather) by the first
     * blocking call of the accelerated set on the communicator, never here:
     * a nonblocking call must not wait for its peers. Until then nonblocking
     * calls are staged; every rank has made the same calls, so every rank
     * sees the same state. */
    if (OMPI_COMM_IS_INTER(comm)) return NULL;
    if (0 == m->core_state) m->nonblocking_seen = true; /* the next barrier sets it up */
    if (1 != m->core_state) return NULL;
    gpucoll_comm_t* core = m->core;
    /* MPI_THREAD_MULTIPLE: our progress function could run in one thread
     * while another runs a blocking call on the same core; nonblocking calls
     * are staged there (the thread level is part of the settings every rank
     * of the communicator agreed on, so the choice is the same everywhere). */
    if (NULL == core || GPUCOLL_ASSERT_HOST_ONLY == m->asserted_kinds ||
        !gpucoll_comm_nonblocking(core) || mca_coll_gpucoll_component.thread_multiple)
        return NULL;
    return core;
}

int mca_coll_gpucoll_nonblocking_decline(mca_coll_gpucoll_module_t* m, gpucoll_comm_t* core,
                                         bool host_call) {
    /* Host calls skip the core under the uniform-memory assertion. A call
     * with device buffers that cannot be accelerated (a datatype that only
     * this rank's description makes ineligible, a host buffer beside a
     * device one) still posts: the others may have queued it, as the
     * blocking path's gpucoll_comm_run does. */
    if (m->uniform_memory && host_call) return OMPI_SUCCESS;
    int rc = gpucoll_comm_start_decline(core);
    return GPUCOLL_SUCCESS == rc ? OMPI_SUCCESS : mca_coll_gpucoll_core_error("decline", rc);
}

static void gpucoll_track(mca_coll_gpucoll_request_t* r) {
    while (atomic_flag_test_and_set_explicit(&gpucoll_active_lock, memory_order_acquire)) {
    }
    if (!gpucoll_progress_registered) {
        opal_progress_register(gpucoll_nonblocking_progress);
        gpucoll_progress_registered = true;
    }
    r->next = gpucoll_active; /* order does not matter: each call's queue is in order */
    gpucoll_active = r;
    atomic_flag_clear_explicit(&gpucoll_active_lock, memory_order_release);
}

int mca_coll_gpucoll_nonblocking_start_persistent(mca_coll_gpucoll_request_t* r) {
    mca_coll_gpucoll_module_t* m = r->module;
    if (1 != m->core_state) { /* torn down by MPI_Comm_free: on every rank */
        const int rc = gpucoll_start_declined_persistent(r);
        if (OMPI_SUCCESS != rc) mca_coll_gpucoll_request_complete(r, rc);
        return rc;
    }
    if (NULL != r->plan && !gpucoll_plan_matches(m->core, r->plan)) {
        /* Made for a core that was set up again since (the GPU changed): the
         * same on every rank, so every rank starts without its plan. */
        gpucoll_plan_free(r->plan);
        r->plan = NULL;
    }
    const int rc = NULL != r->plan ? gpucoll_plan_start(m->core, r->plan, &r->pending)
                                   : gpucoll_comm_start(m->core, &r->call, GPUCOLL_FORM_PERSISTENT,
                                                        &r->pending);
    if (GPUCOLL_SUCCESS != rc) {
        const int orc = mca_coll_gpucoll_core_error(gpucoll_coll_name(r->call.coll), rc);
        mca_coll_gpucoll_request_complete(r, orc);
        return orc;
    }
    gpucoll_track(r);
    return OMPI_SUCCESS;
}

int mca_coll_gpucoll_nonblocking_start(mca_coll_gpucoll_module_t* m,
                                       struct ompi_communicator_t* comm, gpucoll_comm_t* core,
                                       const gpucoll_call_t* call,
                                       const mca_coll_gpucoll_staging_t* staging,
                                       const mca_coll_gpucoll_args_t* args,
                                       ompi_request_t** request) {
    mca_coll_gpucoll_request_t* r = NULL;
    int rc = mca_coll_gpucoll_request_new_deferred(comm, staging, &r);
    if (OMPI_SUCCESS != rc) return rc;
    r->module = m;
    r->args = *args;
    r->args.counts = NULL; /* the caller's, freed once the core has its copy */
    r->nbc_tag = gpucoll_reserve_nbc_tag(comm);
    rc = gpucoll_comm_start(core, call, GPUCOLL_FORM_NONBLOCKING, &r->pending);
    if (GPUCOLL_SUCCESS != rc) {
        mca_coll_gpucoll_request_discard(r);
        return mca_coll_gpucoll_core_error(gpucoll_coll_name(call->coll), rc);
    }
    *request = &r->super.super;
    gpucoll_track(r);
    return OMPI_SUCCESS;
}

/* ---------------------------------------------------------------------------
 * The entry points: how each collective describes its call to the core
 * ------------------------------------------------------------------------- */

/* The builders of coll_gpucoll_accel.c with the collectives' own parameter
 * lists (the entry points below are generated from them). */
static inline bool dev(const void* p) { return mca_coll_gpucoll_is_device(p); }

static bool build_allreduce(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a, const void* sbuf,
                            void* rbuf, mca_coll_gpucoll_count_t count,
                            struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                            struct ompi_communicator_t* comm) {
    (void)comm;
    return mca_coll_gpucoll_build_allreduce(call, a, dev(sbuf), dev(rbuf), sbuf, rbuf, count, dtype,
                                            op);
}

static bool build_bcast(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a, void* buf,
                        mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype, int root,
                        struct ompi_communicator_t* comm) {
    (void)comm;
    return mca_coll_gpucoll_build_bcast(call, a, dev(buf), buf, count, dtype, root);
}

static bool build_allgather(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a, const void* sbuf,
                            mca_coll_gpucoll_count_t scount, struct ompi_datatype_t* sdtype,
                            void* rbuf, mca_coll_gpucoll_count_t rcount,
                            struct ompi_datatype_t* rdtype, struct ompi_communicator_t* comm) {
    (void)comm;
    return mca_coll_gpucoll_build_allgather(call, a, dev(sbuf), dev(rbuf), sbuf, scount, sdtype,
                                            rbuf, rcount, rdtype);
}

/* a->counts: allocated here, freed by the caller once the core has its copy
 * (persistent requests keep it). */
static bool build_reduce_scatter(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a, const void* sbuf,
                                 void* rbuf, mca_coll_gpucoll_counts_t rcounts,
                                 struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                 struct ompi_communicator_t* comm) {
    a->counts = malloc(sizeof(size_t) * (size_t)ompi_comm_size(comm));
    if (NULL == a->counts) return false; /* declined: staged */
    return mca_coll_gpucoll_build_reduce_scatter(call, a, dev(sbuf), dev(rbuf), a->counts, sbuf,
                                                 rbuf, rcounts, dtype, op, comm);
}

static bool build_reduce_scatter_block(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a,
                                       const void* sbuf, void* rbuf,
                                       mca_coll_gpucoll_count_t rcount,
                                       struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                       struct ompi_communicator_t* comm) {
    (void)comm;
    return mca_coll_gpucoll_build_reduce_scatter_block(call, a, dev(sbuf), dev(rbuf), sbuf, rbuf,
                                                       rcount, dtype, op);
}

static bool build_reduce(gpucoll_call_t* call, mca_coll_gpucoll_args_t* a, const void* sbuf,
                         void* rbuf, mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                         struct ompi_op_t* op, int root, struct ompi_communicator_t* comm) {
    const bool at_root = ompi_comm_rank(comm) == root; /* intracommunicators only */
    return mca_coll_gpucoll_build_reduce(call, a, dev(sbuf), dev(rbuf), at_root, sbuf, rbuf, count,
                                         dtype, op, root);
}

/* Open MPI starts collectives of its own on a communicator from its
 * progress engine: the rounds of MPI_Comm_idup (one int, MPI_MAX or
 * MPI_MIN: an iallreduce on an intracommunicator; an ireduce and an ibcast
 * on an intercommunicator's local group). They start wherever progress
 * runs: inside a blocking call on one rank, in MPI_Wait or MPI_Test on
 * another, before the accelerated path was set up on one rank and after
 * on another. Counted with the application's calls they would shift the
 * call numbers of some ranks only (wrong results, a hang). What keeps them
 * out must be decided alike on every rank, so it looks only at what every
 * rank passes alike, the bytes of the call: nonblocking allreduce, reduce
 * and bcast of at most this many bytes go to Open MPI's own module on
 * every rank without the core (device buffers staged), and do not ask for
 * the accelerated path to be set up. */
#define MCA_COLL_GPUCOLL_TINY_NONBLOCKING_BYTES 8

static bool tiny(mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype) {
    size_t size = 0;
    if (OMPI_SUCCESS != ompi_datatype_type_size(dtype, &size)) return false;
    return (size_t)count * size <= MCA_COLL_GPUCOLL_TINY_NONBLOCKING_BYTES;
}

/* i<name> on the accelerated path where the communicator has one, else
 * staged (coll_gpucoll_forms.c: mca_coll_gpucoll_staged_i<name>). Also when
 * made from inside a saved host algorithm on this communicator (in_host):
 * every rank must post (or not) the same calls, so the core counts them
 * all, except the tiny ones above (TINY: this call is one). */
#define GPUCOLL_DEFINE_I_ACCEL(name, DECL, ARGS, TINY)                                             \
    int mca_coll_gpucoll_accel_i##name(GPUCOLL_UNPACK DECL, struct ompi_communicator_t* comm,      \
                                       ompi_request_t** request, mca_coll_base_module_t* module) { \
        mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;                         \
        if (TINY)                                                                                  \
            return mca_coll_gpucoll_staged_i##name(GPUCOLL_UNPACK ARGS, comm, request, module);    \
        gpucoll_comm_t* core = mca_coll_gpucoll_nonblocking_core(m, comm);                         \
        if (NULL == core)                                                                          \
            return mca_coll_gpucoll_staged_i##name(GPUCOLL_UNPACK ARGS, comm, request, module);    \
        mca_coll_gpucoll_staging_t stage, *st = &stage;                                            \
        int rc = mca_coll_gpucoll_describe_##name(st, GPUCOLL_UNPACK ARGS, comm);                  \
        if (MCA_COLL_GPUCOLL_DESCRIBE_ERROR == rc) return st->error;                               \
        gpucoll_call_t call = {0};                                                                 \
        mca_coll_gpucoll_args_t args = {0};                                                        \
        if (MCA_COLL_GPUCOLL_DESCRIBE_HOST == rc) { /* no device buffer: Open MPI's own */         \
            rc = mca_coll_gpucoll_nonblocking_decline(m, core, true);                              \
            if (OMPI_SUCCESS != rc) return rc;                                                     \
            mca_coll_gpucoll_record_delegated(st->coll, GPUCOLL_FORM_NONBLOCKING);                 \
            mca_coll_gpucoll_enter_host(m);                                                        \
            rc = m->prev_i##name(GPUCOLL_UNPACK ARGS, comm, request, m->prev_i##name##_module);    \
            mca_coll_gpucoll_leave_host(m);                                                        \
            return rc;                                                                             \
        }                                                                                          \
        const bool all_device =                                                                    \
            build_##name(&call, &args, GPUCOLL_UNPACK ARGS, comm) && call.eligible;                \
        if (all_device) {                                                                          \
            call.on_device = 1;                                                                    \
            rc = mca_coll_gpucoll_nonblocking_start(m, comm, core, &call, st, &args, request);     \
        } else { /* declined everywhere: staged */                                                 \
            rc = mca_coll_gpucoll_nonblocking_decline(m, core, false);                             \
            if (OMPI_SUCCESS == rc)                                                                \
                rc = mca_coll_gpucoll_staged_i##name(GPUCOLL_UNPACK ARGS, comm, request, module);  \
        }                                                                                          \
        free(args.counts); /* reduce_scatter: the core has its copy */                             \
        return rc;                                                                                 \
    }

GPUCOLL_DEFINE_I_ACCEL(allreduce,
                       (const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                        struct ompi_datatype_t* dtype, struct ompi_op_t* op),
                       (sbuf, rbuf, count, dtype, op), tiny(count, dtype))
GPUCOLL_DEFINE_I_ACCEL(bcast,
                       (void* buf, mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                        int root),
                       (buf, count, dtype, root), tiny(count, dtype))
GPUCOLL_DEFINE_I_ACCEL(allgather,
                       (const void* sbuf, mca_coll_gpucoll_count_t scount,
                        struct ompi_datatype_t* sdtype, void* rbuf, mca_coll_gpucoll_count_t rcount,
                        struct ompi_datatype_t* rdtype),
                       (sbuf, scount, sdtype, rbuf, rcount, rdtype), false)
GPUCOLL_DEFINE_I_ACCEL(reduce_scatter,
                       (const void* sbuf, void* rbuf, mca_coll_gpucoll_counts_t rcounts,
                        struct ompi_datatype_t* dtype, struct ompi_op_t* op),
                       (sbuf, rbuf, rcounts, dtype, op), false)
GPUCOLL_DEFINE_I_ACCEL(reduce_scatter_block,
                       (const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount,
                        struct ompi_datatype_t* dtype, struct ompi_op_t* op),
                       (sbuf, rbuf, rcount, dtype, op), false)
GPUCOLL_DEFINE_I_ACCEL(reduce,
                       (const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                        struct ompi_datatype_t* dtype, struct ompi_op_t* op, int root),
                       (sbuf, rbuf, count, dtype, op, root), tiny(count, dtype))

/* <name>_init on the accelerated path where the communicator has one. A
 * rank whose buffers are all device memory gets a request whose every start
 * goes to the core; the others (host memory, an ineligible call) get the
 * saved module's request, staged or not, whose every start first posts
 * this rank's decline, since the device ranks wait for every rank's post
 * (host buffers under the uniform-memory assertion: no post, as blocking
 * and nonblocking host calls). */
#define GPUCOLL_DEFINE_INIT_ACCEL(name, DECL, ARGS)                                                \
    int mca_coll_gpucoll_accel_##name##_init(                                                      \
        GPUCOLL_UNPACK DECL, struct ompi_communicator_t* comm, struct ompi_info_t* info,           \
        ompi_request_t** request, mca_coll_base_module_t* module) {                                \
        mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;                         \
        gpucoll_comm_t* core = mca_coll_gpucoll_nonblocking_core(m, comm);                         \
        if (NULL == core)                                                                          \
            return mca_coll_gpucoll_staged_##name##_init(GPUCOLL_UNPACK ARGS, comm, info, request, \
                                                         module);                                  \
        mca_coll_gpucoll_staging_t stage, *st = &stage;                                            \
        int rc = mca_coll_gpucoll_describe_##name(st, GPUCOLL_UNPACK ARGS, comm);                  \
        if (MCA_COLL_GPUCOLL_DESCRIBE_ERROR == rc) return st->error;                               \
        gpucoll_call_t call = {0};                                                                 \
        mca_coll_gpucoll_args_t args = {0};                                                        \
        const bool staged = MCA_COLL_GPUCOLL_DESCRIBE_STAGE == rc;                                 \
        const bool all_device =                                                                    \
            staged && build_##name(&call, &args, GPUCOLL_UNPACK ARGS, comm) && call.eligible;      \
        mca_coll_gpucoll_request_t* r = NULL;                                                      \
        if (all_device) {                                                                          \
            call.on_device = 1;                                                                    \
            rc = mca_coll_gpucoll_request_new_accelerated(comm, st, &r);                           \
            if (OMPI_SUCCESS != rc) {                                                              \
                free(args.counts);                                                                 \
                return rc;                                                                         \
            }                                                                                      \
            r->module = m;                                                                         \
            r->args = args; /* keeps counts: the core copies them at each start */                 \
            r->call = call;                                                                        \
            /* Set up once (algorithm, buffers described); NULL: each start */                     \
            /* does it (a core that cannot plan: it stages those calls). */                        \
            if (GPUCOLL_SUCCESS != gpucoll_plan_create(core, &r->call, &r->plan)) r->plan = NULL;  \
            r->nbc_tag = gpucoll_reserve_nbc_tag(comm);                                            \
            *request = &r->super.super;                                                            \
            return OMPI_SUCCESS;                                                                   \
        }                                                                                          \
        free(args.counts);                                                                         \
        if (staged) { /* the staged request, posting declines */                                   \
            rc = mca_coll_gpucoll_staged_##name##_init(GPUCOLL_UNPACK ARGS, comm, info, request,   \
                                                       module);                                    \
            if (OMPI_SUCCESS == rc) {                                                              \
                r = (mca_coll_gpucoll_request_t*)*request;                                         \
                r->module = m;                                                                     \
                r->post_decline = true;                                                            \
            }                                                                                      \
            return rc;                                                                             \
        }                                                                                          \
        /* host buffers: the saved request on them, wrapped */                                     \
        rc = mca_coll_gpucoll_request_new(comm, st, true, &r);                                     \
        if (OMPI_SUCCESS != rc) return rc;                                                         \
        r->module = m;                                                                             \
        r->post_decline = !m->uniform_memory; /* host calls skip the core under the assertion */   \
        ompi_request_t* inner = NULL;                                                              \
        mca_coll_gpucoll_enter_host(m);                                                            \
        rc = m->prev_##name##_init(GPUCOLL_UNPACK ARGS, comm, info, &inner,                        \
                                   m->prev_##name##_init_module);                                  \
        mca_coll_gpucoll_leave_host(m);                                                            \
        return mca_coll_gpucoll_request_launch(r, rc, inner, request);                             \
    }

GPUCOLL_DEFINE_INIT_ACCEL(allreduce,
                          (const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                           struct ompi_datatype_t* dtype, struct ompi_op_t* op),
                          (sbuf, rbuf, count, dtype, op))
GPUCOLL_DEFINE_INIT_ACCEL(bcast,
                          (void* buf, mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                           int root),
                          (buf, count, dtype, root))
GPUCOLL_DEFINE_INIT_ACCEL(allgather,
                          (const void* sbuf, mca_coll_gpucoll_count_t scount,
                           struct ompi_datatype_t* sdtype, void* rbuf,
                           mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* rdtype),
                          (sbuf, scount, sdtype, rbuf, rcount, rdtype))
GPUCOLL_DEFINE_INIT_ACCEL(reduce_scatter,
                          (const void* sbuf, void* rbuf, mca_coll_gpucoll_counts_t rcounts,
                           struct ompi_datatype_t* dtype, struct ompi_op_t* op),
                          (sbuf, rbuf, rcounts, dtype, op))
GPUCOLL_DEFINE_INIT_ACCEL(reduce_scatter_block,
                          (const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount,
                           struct ompi_datatype_t* dtype, struct ompi_op_t* op),
                          (sbuf, rbuf, rcount, dtype, op))
GPUCOLL_DEFINE_INIT_ACCEL(reduce,
                          (const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                           struct ompi_datatype_t* dtype, struct ompi_op_t* op, int root),
                          (sbuf, rbuf, count, dtype, op, root))

/*
 * coll_gpucoll.h - the Open MPI collectives component coll/gpucoll.
 *
 * The component intercepts every collective with buffers, in every form.
 * Per call it classifies the buffers that are significant for this rank:
 *  - none is device memory  -> the saved (lower-priority) host function, untouched;
 *  - some are device memory -> blocking allreduce, bcast, allgather,
 *    reduce_scatter(_block) and reduce: the accelerated path
 *    (coll_gpucoll_accel.c, agreed between ranks) or staged
 *    (coll_gpucoll_staged.c); reduce_local on two device buffers: a device
 *    kernel; everything else (every other collective, every nonblocking and
 *    persistent form): staged (coll_gpucoll_forms.c, coll_gpucoll_request.c).
 *
 * This is the only part of gpucoll that includes Open MPI's internal headers;
 * it talks to the core only through gpucoll.h.
 */
#ifndef MCA_COLL_GPUCOLL_H
#define MCA_COLL_GPUCOLL_H

#include <stdbool.h>
#include <stddef.h>

#include "coll_gpucoll_compat.h"
#include "gpucoll.h"
#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/mca/mca.h"
#include "ompi/request/request.h"
#include "ompi_config.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

BEGIN_C_DECLS

/* What differs between Open MPI 4.1, 5.0 and 6.0: coll_gpucoll_compat.h. */

/* The collectives this component intercepts, in one list. X(name, coll_id)
 * expands once per collective: name is the suffix of c_coll->coll_<name>. */
#define MCA_COLL_GPUCOLL_FOREACH_INTERCEPTED(X)                \
    X(allreduce, GPUCOLL_COLL_ALLREDUCE)                       \
    X(bcast, GPUCOLL_COLL_BCAST)                               \
    X(allgather, GPUCOLL_COLL_ALLGATHER)                       \
    X(reduce_scatter, GPUCOLL_COLL_REDUCE_SCATTER)             \
    X(reduce_scatter_block, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK) \
    X(reduce, GPUCOLL_COLL_REDUCE)                             \
    X(reduce_local, GPUCOLL_COLL_REDUCE_LOCAL)

/* Collectives of the list above whose nonblocking and persistent forms are
 * intercepted too (X(name, type, coll_id): type names the function types,
 * mca_coll_base_module_i<type>_fn_t and <type>_init_fn_t). */
#define MCA_COLL_GPUCOLL_FOREACH_ACCEL_FORMS(X)                                      \
    X(allreduce, allreduce, GPUCOLL_COLL_ALLREDUCE)                                  \
    X(bcast, bcast, GPUCOLL_COLL_BCAST)                                              \
    X(allgather, allgather, GPUCOLL_COLL_ALLGATHER)                                  \
    X(reduce_scatter, reduce_scatter, GPUCOLL_COLL_REDUCE_SCATTER)                   \
    X(reduce_scatter_block, reduce_scatter_block, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK) \
    X(reduce, reduce, GPUCOLL_COLL_REDUCE)

/* Collectives only the staged path serves, in all three forms (blocking
 * <name>, nonblocking i<name>, persistent <name>_init). */
#define MCA_COLL_GPUCOLL_FOREACH_STAGED(X)                               \
    X(allgatherv, allgatherv, GPUCOLL_COLL_ALLGATHERV)                   \
    X(alltoall, alltoall, GPUCOLL_COLL_ALLTOALL)                         \
    X(alltoallv, alltoallv, GPUCOLL_COLL_ALLTOALLV)                      \
    X(alltoallw, alltoallw, GPUCOLL_COLL_ALLTOALLW)                      \
    X(gather, gather, GPUCOLL_COLL_GATHER)                               \
    X(gatherv, gatherv, GPUCOLL_COLL_GATHERV)                            \
    X(scatter, scatter, GPUCOLL_COLL_SCATTER)                            \
    X(scatterv, scatterv, GPUCOLL_COLL_SCATTERV)                         \
    X(scan, scan, GPUCOLL_COLL_SCAN)                                     \
    X(exscan, exscan, GPUCOLL_COLL_EXSCAN)                               \
    X(neighbor_allgather, allgather, GPUCOLL_COLL_NEIGHBOR_ALLGATHER)    \
    X(neighbor_allgatherv, allgatherv, GPUCOLL_COLL_NEIGHBOR_ALLGATHERV) \
    X(neighbor_alltoall, alltoall, GPUCOLL_COLL_NEIGHBOR_ALLTOALL)       \
    X(neighbor_alltoallv, alltoallv, GPUCOLL_COLL_NEIGHBOR_ALLTOALLV)    \
    X(neighbor_alltoallw, neighbor_alltoallw, GPUCOLL_COLL_NEIGHBOR_ALLTOALLW)

/* ---------------------------------------------------------------------------
 * Component
 * ------------------------------------------------------------------------- */

/* Values of the "device" parameter (index = enum value). */
enum mca_coll_gpucoll_device {
    MCA_COLL_GPUCOLL_DEVICE_AUTO = 0,
    MCA_COLL_GPUCOLL_DEVICE_CUDA,
    MCA_COLL_GPUCOLL_DEVICE_EMU
};

typedef struct mca_coll_gpucoll_component_t {
    mca_coll_gpucoll_base_component_t super;

    /* MCA parameters (registered in coll_gpucoll_component.c) */
    int priority;
    int device; /* enum mca_coll_gpucoll_device */
    int verbose;
    /* accelerated path: forced algorithm per collective (gpucoll_algorithm_t) */
    int algorithm[GPUCOLL_COLL_COUNT];
    bool uniform_memory;
    int host_cache;      /* -1 auto, 0 off, 1 on (gpucoll_set_host_cache 1, 0, 2) */
    int device_flags;    /* GPUCOLL_FLAGS_HOST, _DEVICE or _AUTO */
    int host_pipeline;   /* -1 auto, 0 off, 1 on */
    int progress_thread; /* nonblocking calls advance on threads of the core: -1 auto, 0 off, 1 on,
                            2 lazy */
    size_t one_shot_max;
    size_t one_kernel_max; /* allreduce: one-kernel path up to this size (0: forced only) */
    size_t chain_min;
    size_t chunk_size;
    int ipc_cache_size;
    size_t ipc_cache_bytes; /* 0: the backend's default */
    int inter_algorithm;    /* 0 auto, 1 ring, 2 direct */
    size_t inter_chunk_size;
    size_t inter_direct_max;
    int inter_device_memory; /* 0 auto, 1 direct, 2 staged */
    int inter_bcast;         /* 0 auto, 1 tree, 2 chain */
    char* topology_file;     /* hwloc XML of the node (NULL: discover) */
    char* nvlink_file;       /* its NVLinks (NULL: NVML) */
    char* cost_model;        /* preset or params file (NULL: size thresholds) */
    char* selection_file;    /* measured selection table: auto (built-in), none, or a file */
    bool rails;              /* UCX_NET_DEVICES per process from the topology */
    bool timing;             /* per-step times of accelerated calls, printed at finalize */
    char* rail_devices;      /* the NIC of each GPU, given (NULL: discovered) */
    int wait_warning;        /* seconds a blocking wait lasts before it says so (0: never) */
    int max_comms;           /* communicators with an accelerated path at once (0: no bound) */
    int peer_timeout;        /* seconds without data from a peer on another node in a call (0: for ever) */
    int version_check;       /* MCA_COLL_GPUCOLL_VERSION_CHECK_* */

    /* state */
    int output;           /* opal_output stream, verbosity = verbose */
    bool backend_ready;   /* init_query found a device backend */
    bool thread_multiple; /* MPI_THREAD_MULTIPLE (init_query) */
} mca_coll_gpucoll_component_t;

MCA_COLL_GPUCOLL_DECLSPEC extern mca_coll_gpucoll_component_t mca_coll_gpucoll_component;

/* The Open MPI release the component may run in (coll_gpucoll_version.c). */
enum {
    MCA_COLL_GPUCOLL_VERSION_CHECK_OFF = 0,
    MCA_COLL_GPUCOLL_VERSION_CHECK_SERIES = 1,
    MCA_COLL_GPUCOLL_VERSION_CHECK_EXACT = 2
};
/* built and running releases ("5.0.7"; running NULL: unknown) agree under mode. */
bool mca_coll_gpucoll_release_matches(const char* built, const char* running, int mode);
/* OMPI_SUCCESS where this process's Open MPI is the one the component was
 * built for (under mode); else one line on stderr (first rank) and
 * OMPI_ERR_NOT_AVAILABLE: Open MPI goes on without the component. */
int mca_coll_gpucoll_version_guard(int mode);

int mca_coll_gpucoll_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t* mca_coll_gpucoll_comm_query(struct ompi_communicator_t* comm,
                                                    int* priority);

/* Verbosity levels of the component's stream. */
#define MCA_COLL_GPUCOLL_VERBOSE_SELECT 1 /* per communicator: selected or not, why */
#define MCA_COLL_GPUCOLL_VERBOSE_CALL 10  /* per call: path and sizes */

/* Checks the level before the call: free on the host path when quiet. */
#define GPUCOLL_VERBOSE(level, ...)                                         \
    do {                                                                    \
        if (mca_coll_gpucoll_component.verbose >= (level)) {                \
            opal_output_verbose((level), mca_coll_gpucoll_component.output, \
                                "coll:gpucoll: " __VA_ARGS__);              \
        }                                                                   \
    } while (0)

/* Always printed, with the process and node it comes from. */
#define GPUCOLL_ERROR(fmt, ...)                                                      \
    opal_output(0, "coll:gpucoll %s (%s): " fmt, OPAL_NAME_PRINT(OPAL_PROC_MY_NAME), \
                opal_process_info.nodename, __VA_ARGS__)

/* ---------------------------------------------------------------------------
 * Module: one per communicator. It keeps the (function, module) pairs that
 * would have run without us, each module retained, so that host calls and
 * staged calls go to them.
 * ------------------------------------------------------------------------- */

#define MCA_COLL_GPUCOLL_DECLARE_PREV(name, id)     \
    mca_coll_base_module_##name##_fn_t prev_##name; \
    mca_coll_base_module_t* prev_##name##_module;

/* The saved nonblocking and persistent functions of a collective. */
#define MCA_COLL_GPUCOLL_DECLARE_PREV_FORMS(name, type, id)     \
    mca_coll_base_module_i##type##_fn_t prev_i##name;           \
    mca_coll_base_module_t* prev_i##name##_module;              \
    mca_coll_base_module_##type##_init_fn_t prev_##name##_init; \
    mca_coll_base_module_t* prev_##name##_init_module;
#define MCA_COLL_GPUCOLL_DECLARE_PREV_ALL(name, type, id) \
    mca_coll_base_module_##type##_fn_t prev_##name;       \
    mca_coll_base_module_t* prev_##name##_module;         \
    MCA_COLL_GPUCOLL_DECLARE_PREV_FORMS(name, type, id)

typedef struct mca_coll_gpucoll_module_t {
    mca_coll_base_module_t super;
    MCA_COLL_GPUCOLL_FOREACH_INTERCEPTED(MCA_COLL_GPUCOLL_DECLARE_PREV)
    MCA_COLL_GPUCOLL_FOREACH_ACCEL_FORMS(MCA_COLL_GPUCOLL_DECLARE_PREV_FORMS)
    MCA_COLL_GPUCOLL_FOREACH_STAGED(MCA_COLL_GPUCOLL_DECLARE_PREV_ALL)
    /* accelerated path (coll_gpucoll_accel.c), created at the first call */
    gpucoll_comm_t* core;
    uint64_t core_key; /* the key the core is registered under (libgpucoll_mpix), 0: none */
    int core_state; /* 0: not tried yet, 1: ready, -1: not available */
    /* A nonblocking or persistent call of the accelerated set was made here
     * before the core existed (every rank makes the same calls): the next
     * MPI_Barrier sets the core up, so that later ones are accelerated. */
    bool nonblocking_seen;
    mca_coll_base_module_barrier_fn_t prev_barrier;
    mca_coll_base_module_t* prev_barrier_module;
    bool uniform_memory; /* host calls skip the core: no agreement needed */
    int asserted_kinds;  /* info key mpi_assert_memory_alloc_kinds: GPUCOLL_ASSERT_* */
    int host_depth;      /* > 0: inside the saved host module (mca_coll_gpucoll_in_host) */
    /* Blocking calls classify their buffers, decline and count in one call
     * into the core (gpucoll_comm_host_call): once the core was tried, on
     * intracommunicators; per-call verbose output takes the long way. */
    bool host_fast;
    /* The core's host gate (gpucoll_comm_host_gate): host calls decline and
     * count inline, without a call into the core; NULL: they call it. */
    gpucoll_host_gate_t* host_gate;
    bool free_watched; /* gpucoll_comm_freed is attached to the communicator */
} mca_coll_gpucoll_module_t;

/* What the info key mpi_assert_memory_alloc_kinds promises for a communicator. */
enum { GPUCOLL_ASSERT_NONE = 0, GPUCOLL_ASSERT_DEVICE_ONLY = 1, GPUCOLL_ASSERT_HOST_ONLY = 2 };

OBJ_CLASS_DECLARATION(mca_coll_gpucoll_module_t);

/* A new module for comm with our functions installed. */
mca_coll_gpucoll_module_t* mca_coll_gpucoll_module_new(struct ompi_communicator_t* comm);
/* Installs the entry points of coll_gpucoll_forms.c: every form of the
 * collectives only the staged path serves, and the nonblocking and
 * persistent forms of the others. */
void mca_coll_gpucoll_install_forms(mca_coll_gpucoll_module_t* m);

/* ---------------------------------------------------------------------------
 * A staged call: for each of (at most) two buffers of this rank, the span
 * that is copied to host memory, whether the collective reads it (copied in
 * before each run) and the part it writes (copied back after: where that
 * part has gaps, only the bytes its datatypes cover). Blocking
 * calls keep it on the stack; nonblocking and persistent ones in their
 * request (coll_gpucoll_request.c).
 * ------------------------------------------------------------------------- */

enum { MCA_COLL_GPUCOLL_STAGE_MAX = 2 };

/* The blocks a collective writes into a buffer, as described by its
 * arguments: n blocks, block i holding counts[i] elements of dtype (or
 * dtypes[i]) at displs[i] x unit bytes (or adispls[i] bytes) from the
 * buffer pointer; one block (counts NULL): count elements at 0. The arrays
 * and datatypes are the application's, valid until the call completes. */
typedef struct mca_coll_gpucoll_blocks {
    int n;
    size_t count;
    mca_coll_gpucoll_counts_t counts;
    mca_coll_gpucoll_displs_t displs;
    mca_coll_gpucoll_adispls_t adispls;
    bool has_adispls; /* adispls, not displs x unit */
    ptrdiff_t unit;
    struct ompi_datatype_t* dtype;
    struct ompi_datatype_t* const* dtypes;
} mca_coll_gpucoll_blocks_t;

typedef struct mca_coll_gpucoll_sbuf {
    char* user;       /* the application's pointer */
    char* host;       /* what the host module gets: host + d addresses the copy of user + d */
    ptrdiff_t lo;     /* the staged span, relative to user */
    size_t bytes;     /* its length */
    ptrdiff_t out_lo; /* the span the collective writes, relative to user */
    size_t out_bytes; /* its length (0: copied back never) */
    /* The written span has gaps (bytes between the blocks, or inside their
     * datatype) that belong to the application: only the bytes out_blocks
     * cover are copied back, as the runs staging_alloc computes. */
    bool out_exact;
    mca_coll_gpucoll_blocks_t out_blocks;
    gpucoll_copy_run_t* runs; /* out_exact: malloc'ed by staging_alloc */
    size_t nruns;
    size_t out_covered; /* out_exact: the bytes the runs copy */
    bool device;        /* staged at all */
    bool copy_in;       /* read by the collective (or written over part of its span): copied in */
    bool pinned;        /* heap is pinned host memory (gpucoll_malloc_host) */
    bool pooled;        /* heap comes from (and goes back to) the nonblocking pool */
    bool mapped;        /* heap is an anonymous mapping of bytes (a refused span: zeros) */
    bool reserved;      /* heap is a piece of the reserve of zeros (refused, no mapping left) */
    void* heap;         /* allocation owned by this call, or NULL */
    size_t cap;         /* pooled: the capacity of heap */
} mca_coll_gpucoll_sbuf_t;

typedef struct mca_coll_gpucoll_staging {
    gpucoll_coll_t coll;
    bool own_slots;  /* this call holds the library's pinned staging slots */
    bool persistent; /* allocations live as long as a persistent request */
    bool pooled;     /* nonblocking: host copies from the pool of pinned buffers */
    /* A device buffer of this rank does not fit its allocation
     * (refused_error MPI_ERR_BUFFER), or this rank has no host memory to
     * stage it (MPI_ERR_NO_MEM): the rank still takes part in the host
     * collective (on zeros, so that no peer hangs) but writes nothing and
     * returns refused_error. */
    bool refused;
    int refused_error;
    bool holds_reserve; /* some buffer's zeros are the process's reserve */
    uint64_t copied;
    int error; /* describe: the MPI error of a refused call */
    mca_coll_gpucoll_sbuf_t buf[MCA_COLL_GPUCOLL_STAGE_MAX];
} mca_coll_gpucoll_staging_t;

/* What a describe function (coll_gpucoll_describe.c) found. */
enum {
    MCA_COLL_GPUCOLL_DESCRIBE_ERROR = -1, /* refused: c->error */
    MCA_COLL_GPUCOLL_DESCRIBE_HOST = 0,   /* no device buffer here: delegate */
    MCA_COLL_GPUCOLL_DESCRIBE_STAGE = 1   /* stage the device buffers */
};

/* The bytes count elements of dtype touch: [user + *lo, + *bytes). */
void mca_coll_gpucoll_span(size_t count, const struct ompi_datatype_t* dtype, ptrdiff_t* lo,
                           size_t* bytes);
/* Writing count elements of dtype leaves no byte of their span untouched. */
bool mca_coll_gpucoll_fills_span(size_t count, const struct ompi_datatype_t* dtype);
/* count elements of dtype are one contiguous block, for any count (MPI-4's
 * large counts included: Open MPI's test takes an int32_t count, and two
 * elements that abut, each contiguous, make any number of them contiguous). */
static inline bool mca_coll_gpucoll_contiguous(const struct ompi_datatype_t* dtype, size_t count) {
    return ompi_datatype_is_contiguous_memory_layout(dtype, (int32_t)(count < 2 ? count : 2));
}
/* The bytes that blocks cover in a buffer at user, as copy runs relative to
 * user (coll_gpucoll_layout.c): adjacent bytes merged, equal blocks at a
 * constant stride as one 2D run. *runs is malloc'ed (*nruns of them, *bytes
 * in all). Reads no memory of the buffer (Open MPI's convertor computes the
 * datatype's segments from its description). OMPI_SUCCESS, or an error
 * (out of memory, a datatype the convertor does not walk). */
int mca_coll_gpucoll_layout_runs(const void* user, const mca_coll_gpucoll_blocks_t* blocks,
                                 gpucoll_copy_run_t** runs, size_t* nruns, size_t* bytes);

/* Generic staging (coll_gpucoll_staged.c) over described buffers. */
/* Host memory for every device buffer: the shared pinned slots (blocking
 * calls of the first thread), pinned memory of its own (persistent), or the
 * heap. */
int mca_coll_gpucoll_staging_alloc(mca_coll_gpucoll_staging_t* c, bool use_slots);
int mca_coll_gpucoll_staging_copy_in(mca_coll_gpucoll_staging_t* c);
int mca_coll_gpucoll_staging_copy_out(mca_coll_gpucoll_staging_t* c);
void mca_coll_gpucoll_staging_record(mca_coll_gpucoll_staging_t* c, gpucoll_form_t form);
void mca_coll_gpucoll_staging_free(mca_coll_gpucoll_staging_t* c);
/* A blocking staged call: host copies (the shared pinned slots where free)
 * and the inputs copied in; then, after the saved function ran with status
 * rc, the results copied back, the call counted, the copies released.
 * Returns rc, or MPI_ERR_BUFFER for a refused buffer. */
int mca_coll_gpucoll_staging_begin(mca_coll_gpucoll_staging_t* c);
int mca_coll_gpucoll_staging_end(mca_coll_gpucoll_staging_t* c, int rc);
/* Frees the pinned buffers nonblocking calls keep for reuse (component close). */
void mca_coll_gpucoll_staging_pool_release(void);
/* The reserve of zeros for a rank that cannot stage: one mapping made once,
 * while mappings can still be made (backend ready), and given back at
 * component close. */
void mca_coll_gpucoll_staging_reserve(void);
void mca_coll_gpucoll_staging_unreserve(void);
/* Reads GPUCOLL_TEST_STAGING_FAIL (tests: make staging allocations fail). */
void mca_coll_gpucoll_staging_test_hook(void);

/* Counts a call this rank hands to the saved module untouched. */
static inline void mca_coll_gpucoll_record_delegated(gpucoll_coll_t coll, gpucoll_form_t form) {
    gpucoll_counters_record_form(coll, GPUCOLL_PATH_DELEGATED, form, 0, "delegated");
    GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL, "%s (%s): host buffers, delegated",
                    gpucoll_coll_name(coll), gpucoll_form_name(form));
}

static inline bool mca_coll_gpucoll_is_device(const void* p) {
    return NULL != p && MPI_IN_PLACE != p && GPUCOLL_MEM_DEVICE == gpucoll_mem_type(p);
}

/* MPI_BOTTOM (NULL in Open MPI) with a datatype of absolute addresses: the
 * address of the first element's first byte, the one to classify (NULL when
 * count elements touch nothing, or at address 0). Out of line: the host
 * path only tests for NULL. */
const void* mca_coll_gpucoll_bottom(size_t count, const struct ompi_datatype_t* dtype);
/* The same for a span of bytes at the absolute address lo: its first byte,
 * or its last where only that one is device memory. */
const void* mca_coll_gpucoll_bottom_span(ptrdiff_t lo, size_t bytes);

/* The address that tells where buf's data lies: buf, or for MPI_BOTTOM the
 * datatype's first byte. */
static inline const void* mca_coll_gpucoll_data_at(const void* buf, size_t count,
                                                   const struct ompi_datatype_t* dtype) {
    return NULL != buf ? buf : mca_coll_gpucoll_bottom(count, dtype);
}

/* Per collective: the buffers of this rank that the staged path copies
 * (coll_gpucoll_describe.c); the arguments are the collective's own. */
int mca_coll_gpucoll_describe_allreduce(mca_coll_gpucoll_staging_t* c, const void* sbuf, void* rbuf,
                                        mca_coll_gpucoll_count_t count,
                                        struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                        struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_bcast(mca_coll_gpucoll_staging_t* c, void* buf,
                                    mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                    int root, struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_allgather(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                        mca_coll_gpucoll_count_t scount,
                                        struct ompi_datatype_t* sdtype, void* rbuf,
                                        mca_coll_gpucoll_count_t rcount,
                                        struct ompi_datatype_t* rdtype,
                                        struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_reduce_scatter(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                             void* rbuf, mca_coll_gpucoll_counts_t rcounts,
                                             struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                             struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_reduce_scatter_block(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                                   void* rbuf, mca_coll_gpucoll_count_t rcount,
                                                   struct ompi_datatype_t* dtype,
                                                   struct ompi_op_t* op,
                                                   struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_reduce(mca_coll_gpucoll_staging_t* c, const void* sbuf, void* rbuf,
                                     mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                     struct ompi_op_t* op, int root,
                                     struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_reduce_local(mca_coll_gpucoll_staging_t* c, const void* inbuf,
                                           void* inoutbuf, mca_coll_gpucoll_count_t count,
                                           struct ompi_datatype_t* dtype);
int mca_coll_gpucoll_describe_allgatherv(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                         mca_coll_gpucoll_count_t scount,
                                         struct ompi_datatype_t* sdtype, void* rbuf,
                                         mca_coll_gpucoll_counts_t rcounts,
                                         mca_coll_gpucoll_displs_t displs,
                                         struct ompi_datatype_t* rdtype,
                                         struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_alltoall(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                       mca_coll_gpucoll_count_t scount,
                                       struct ompi_datatype_t* sdtype, void* rbuf,
                                       mca_coll_gpucoll_count_t rcount,
                                       struct ompi_datatype_t* rdtype,
                                       struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_alltoallv(
    mca_coll_gpucoll_staging_t* c, const void* sbuf, mca_coll_gpucoll_counts_t scounts,
    mca_coll_gpucoll_displs_t sdispls, struct ompi_datatype_t* sdtype, void* rbuf,
    mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_displs_t rdispls,
    struct ompi_datatype_t* rdtype, struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_alltoallw(
    mca_coll_gpucoll_staging_t* c, const void* sbuf, mca_coll_gpucoll_counts_t scounts,
    mca_coll_gpucoll_displs_t sdispls, struct ompi_datatype_t* const* sdtypes, void* rbuf,
    mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_displs_t rdispls,
    struct ompi_datatype_t* const* rdtypes, struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_gather(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                     mca_coll_gpucoll_count_t scount,
                                     struct ompi_datatype_t* sdtype, void* rbuf,
                                     mca_coll_gpucoll_count_t rcount,
                                     struct ompi_datatype_t* rdtype, int root,
                                     struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_gatherv(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                      mca_coll_gpucoll_count_t scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf,
                                      mca_coll_gpucoll_counts_t rcounts,
                                      mca_coll_gpucoll_displs_t displs,
                                      struct ompi_datatype_t* rdtype, int root,
                                      struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_scatter(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                      mca_coll_gpucoll_count_t scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf,
                                      mca_coll_gpucoll_count_t rcount,
                                      struct ompi_datatype_t* rdtype, int root,
                                      struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_scatterv(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                       mca_coll_gpucoll_counts_t scounts,
                                       mca_coll_gpucoll_displs_t displs,
                                       struct ompi_datatype_t* sdtype, void* rbuf,
                                       mca_coll_gpucoll_count_t rcount,
                                       struct ompi_datatype_t* rdtype, int root,
                                       struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_scan(mca_coll_gpucoll_staging_t* c, const void* sbuf, void* rbuf,
                                   mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                   struct ompi_op_t* op, struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_exscan(mca_coll_gpucoll_staging_t* c, const void* sbuf, void* rbuf,
                                     mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                     struct ompi_op_t* op, struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_neighbor_allgather(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                                 mca_coll_gpucoll_count_t scount,
                                                 struct ompi_datatype_t* sdtype, void* rbuf,
                                                 mca_coll_gpucoll_count_t rcount,
                                                 struct ompi_datatype_t* rdtype,
                                                 struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_neighbor_allgatherv(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                                  mca_coll_gpucoll_count_t scount,
                                                  struct ompi_datatype_t* sdtype, void* rbuf,
                                                  mca_coll_gpucoll_counts_t rcounts,
                                                  mca_coll_gpucoll_displs_t displs,
                                                  struct ompi_datatype_t* rdtype,
                                                  struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_neighbor_alltoall(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                                mca_coll_gpucoll_count_t scount,
                                                struct ompi_datatype_t* sdtype, void* rbuf,
                                                mca_coll_gpucoll_count_t rcount,
                                                struct ompi_datatype_t* rdtype,
                                                struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_neighbor_alltoallv(
    mca_coll_gpucoll_staging_t* c, const void* sbuf, mca_coll_gpucoll_counts_t scounts,
    mca_coll_gpucoll_displs_t sdispls, struct ompi_datatype_t* sdtype, void* rbuf,
    mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_displs_t rdispls,
    struct ompi_datatype_t* rdtype, struct ompi_communicator_t* comm);
int mca_coll_gpucoll_describe_neighbor_alltoallw(
    mca_coll_gpucoll_staging_t* c, const void* sbuf, mca_coll_gpucoll_counts_t scounts,
    mca_coll_gpucoll_adispls_t sdispls, struct ompi_datatype_t* const* sdtypes, void* rbuf,
    mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_adispls_t rdispls,
    struct ompi_datatype_t* const* rdtypes, struct ompi_communicator_t* comm);

/* ---------------------------------------------------------------------------
 * Nonblocking and persistent staged requests (coll_gpucoll_request.c). The
 * saved module runs the collective on host copies; the request completes
 * once its request has and the results are back on the device.
 * ------------------------------------------------------------------------- */

/* mca_coll_gpucoll_nbc_request_t: Open MPI's ompi_coll_base_nbc_request_t
 * (coll_gpucoll_compat.h). */

/* The arguments of a nonblocking call on the accelerated path, kept for the
 * saved module in case the call is declined (buffers: in the staging). */
typedef struct mca_coll_gpucoll_args {
    mca_coll_gpucoll_count_t count; /* allgather: rcount; reduce_scatter_block: rcount */
    mca_coll_gpucoll_count_t scount;
    struct ompi_datatype_t* dtype; /* allgather: rdtype */
    struct ompi_datatype_t* sdtype;
    struct ompi_op_t* op;
    int root;
    mca_coll_gpucoll_counts_t
        rcounts;    /* reduce_scatter: the application's (valid until completion) */
    size_t* counts; /* reduce_scatter: in elements for the core (freed at start) */
} mca_coll_gpucoll_args_t;

typedef struct mca_coll_gpucoll_request_t {
    mca_coll_gpucoll_nbc_request_t super; /* what Open MPI's bindings expect */
    ompi_request_t* inner;                /* the saved module's request on host copies */
    struct ompi_communicator_t* comm;     /* retained while the request lives */
    mca_coll_gpucoll_staging_t staging;
    /* accelerated nonblocking calls (coll_gpucoll_nonblocking.c) */
    gpucoll_pending_t* pending; /* the core's call while it has not ended */
    int32_t nbc_tag;            /* libnbc's tag, reserved for a declined call */
    struct mca_coll_gpucoll_module_t* module;
    mca_coll_gpucoll_args_t args;
    struct mca_coll_gpucoll_request_t* next; /* in the list of calls in flight */
    /* persistent requests of the accelerated collectives */
    gpucoll_call_t call;  /* accelerated: the call each MPI_Start hands the core */
    gpucoll_plan_t* plan; /* accelerated, one node: the call set up once at init */
    bool accelerated;     /* each start goes to the core (else to the saved request) */
    bool post_decline;    /* each start posts this rank's decline to the core first */
} mca_coll_gpucoll_request_t;

OBJ_CLASS_DECLARATION(mca_coll_gpucoll_request_t);

/* A request for the staged call *staging (copied in; persistent: its
 * allocations are made here). Copies the device inputs in (nonblocking). */
int mca_coll_gpucoll_request_new(struct ompi_communicator_t* comm,
                                 const mca_coll_gpucoll_staging_t* staging, bool persistent,
                                 mca_coll_gpucoll_request_t** out);
/* Hands r the saved module's request; r completes after it. On error the
 * request is released. Returns an OMPI code. */
int mca_coll_gpucoll_request_launch(mca_coll_gpucoll_request_t* r, int rc, ompi_request_t* inner,
                                    ompi_request_t** request);
/* Releases a request that never got launched. */
void mca_coll_gpucoll_request_discard(mca_coll_gpucoll_request_t* r);
/* A nonblocking request whose staging is described but not allocated (the
 * accelerated path; staged only if the call is declined). */
int mca_coll_gpucoll_request_new_deferred(struct ompi_communicator_t* comm,
                                          const mca_coll_gpucoll_staging_t* staging,
                                          mca_coll_gpucoll_request_t** out);
/* r completes after inner (the saved module's request on r's host copies). */
void mca_coll_gpucoll_request_attach(mca_coll_gpucoll_request_t* r, ompi_request_t* inner);
/* Completes r with rc (results already in place). */
void mca_coll_gpucoll_request_complete(mca_coll_gpucoll_request_t* r, int rc);

/* ---------------------------------------------------------------------------
 * Nonblocking calls on the accelerated path (coll_gpucoll_nonblocking.c)
 * ------------------------------------------------------------------------- */

/* The core when nonblocking calls on comm go through it (one node), or NULL. */
gpucoll_comm_t* mca_coll_gpucoll_nonblocking_core(struct mca_coll_gpucoll_module_t* m,
                                                  struct ompi_communicator_t* comm);
/* Posts this rank's decline of a nonblocking call (host_call: no device
 * buffer; skipped under the uniform-memory assertion). */
int mca_coll_gpucoll_nonblocking_decline(struct mca_coll_gpucoll_module_t* m, gpucoll_comm_t* core,
                                         bool host_call);
int mca_coll_gpucoll_nonblocking_start(struct mca_coll_gpucoll_module_t* m,
                                       struct ompi_communicator_t* comm, gpucoll_comm_t* core,
                                       const gpucoll_call_t* call,
                                       const mca_coll_gpucoll_staging_t* staging,
                                       const mca_coll_gpucoll_args_t* args,
                                       ompi_request_t** request);
void mca_coll_gpucoll_nonblocking_fini(void);
extern bool mca_coll_gpucoll_in_progress_callback;
/* A persistent request whose starts go to the core (staging described, not
 * allocated: only a declined start stages). */
int mca_coll_gpucoll_request_new_accelerated(struct ompi_communicator_t* comm,
                                             const mca_coll_gpucoll_staging_t* staging,
                                             mca_coll_gpucoll_request_t** out);
int mca_coll_gpucoll_request_restart_inner(mca_coll_gpucoll_request_t* r);
/* Starts of persistent requests on the accelerated path (MPI_Start). */
int mca_coll_gpucoll_nonblocking_start_persistent(mca_coll_gpucoll_request_t* r);
/* <name>_init of the accelerated collectives. */
int mca_coll_gpucoll_accel_allreduce_init(const void* sbuf, void* rbuf,
                                          mca_coll_gpucoll_count_t count,
                                          struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                          struct ompi_communicator_t* comm,
                                          struct ompi_info_t* info, ompi_request_t** request,
                                          mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_allreduce_init(const void* sbuf, void* rbuf,
                                           mca_coll_gpucoll_count_t count,
                                           struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                           struct ompi_communicator_t* comm,
                                           struct ompi_info_t* info, ompi_request_t** request,
                                           mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_bcast_init(void* buf, mca_coll_gpucoll_count_t count,
                                      struct ompi_datatype_t* dtype, int root,
                                      struct ompi_communicator_t* comm, struct ompi_info_t* info,
                                      ompi_request_t** request, mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_bcast_init(void* buf, mca_coll_gpucoll_count_t count,
                                       struct ompi_datatype_t* dtype, int root,
                                       struct ompi_communicator_t* comm, struct ompi_info_t* info,
                                       ompi_request_t** request, mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_allgather_init(const void* sbuf, mca_coll_gpucoll_count_t scount,
                                          struct ompi_datatype_t* sdtype, void* rbuf,
                                          mca_coll_gpucoll_count_t rcount,
                                          struct ompi_datatype_t* rdtype,
                                          struct ompi_communicator_t* comm,
                                          struct ompi_info_t* info, ompi_request_t** request,
                                          mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_allgather_init(const void* sbuf, mca_coll_gpucoll_count_t scount,
                                           struct ompi_datatype_t* sdtype, void* rbuf,
                                           mca_coll_gpucoll_count_t rcount,
                                           struct ompi_datatype_t* rdtype,
                                           struct ompi_communicator_t* comm,
                                           struct ompi_info_t* info, ompi_request_t** request,
                                           mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_reduce_scatter_init(const void* sbuf, void* rbuf,
                                               mca_coll_gpucoll_counts_t rcounts,
                                               struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                               struct ompi_communicator_t* comm,
                                               struct ompi_info_t* info, ompi_request_t** request,
                                               mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_reduce_scatter_init(const void* sbuf, void* rbuf,
                                                mca_coll_gpucoll_counts_t rcounts,
                                                struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                                struct ompi_communicator_t* comm,
                                                struct ompi_info_t* info, ompi_request_t** request,
                                                mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_reduce_scatter_block_init(
    const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* dtype,
    struct ompi_op_t* op, struct ompi_communicator_t* comm, struct ompi_info_t* info,
    ompi_request_t** request, mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_reduce_scatter_block_init(
    const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* dtype,
    struct ompi_op_t* op, struct ompi_communicator_t* comm, struct ompi_info_t* info,
    ompi_request_t** request, mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_reduce_init(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                       struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                       int root, struct ompi_communicator_t* comm,
                                       struct ompi_info_t* info, ompi_request_t** request,
                                       mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_reduce_init(const void* sbuf, void* rbuf,
                                        mca_coll_gpucoll_count_t count,
                                        struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                        int root, struct ompi_communicator_t* comm,
                                        struct ompi_info_t* info, ompi_request_t** request,
                                        mca_coll_base_module_t* module);
/* i<name> of the accelerated collectives: accelerated where the communicator
 * allows it, else staged. */
int mca_coll_gpucoll_accel_iallreduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                      struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                      struct ompi_communicator_t* comm, ompi_request_t** request,
                                      mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_iallreduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                       struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                       struct ompi_communicator_t* comm, ompi_request_t** request,
                                       mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_ibcast(void* buf, mca_coll_gpucoll_count_t count,
                                  struct ompi_datatype_t* dtype, int root,
                                  struct ompi_communicator_t* comm, ompi_request_t** request,
                                  mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_ibcast(void* buf, mca_coll_gpucoll_count_t count,
                                   struct ompi_datatype_t* dtype, int root,
                                   struct ompi_communicator_t* comm, ompi_request_t** request,
                                   mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_iallgather(const void* sbuf, mca_coll_gpucoll_count_t scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf,
                                      mca_coll_gpucoll_count_t rcount,
                                      struct ompi_datatype_t* rdtype,
                                      struct ompi_communicator_t* comm, ompi_request_t** request,
                                      mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_iallgather(const void* sbuf, mca_coll_gpucoll_count_t scount,
                                       struct ompi_datatype_t* sdtype, void* rbuf,
                                       mca_coll_gpucoll_count_t rcount,
                                       struct ompi_datatype_t* rdtype,
                                       struct ompi_communicator_t* comm, ompi_request_t** request,
                                       mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_ireduce_scatter(const void* sbuf, void* rbuf,
                                           mca_coll_gpucoll_counts_t rcounts,
                                           struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                           struct ompi_communicator_t* comm,
                                           ompi_request_t** request,
                                           mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_ireduce_scatter(const void* sbuf, void* rbuf,
                                            mca_coll_gpucoll_counts_t rcounts,
                                            struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                            struct ompi_communicator_t* comm,
                                            ompi_request_t** request,
                                            mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_ireduce_scatter_block(
    const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* dtype,
    struct ompi_op_t* op, struct ompi_communicator_t* comm, ompi_request_t** request,
    mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_ireduce_scatter_block(
    const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* dtype,
    struct ompi_op_t* op, struct ompi_communicator_t* comm, ompi_request_t** request,
    mca_coll_base_module_t* module);
int mca_coll_gpucoll_accel_ireduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                   struct ompi_datatype_t* dtype, struct ompi_op_t* op, int root,
                                   struct ompi_communicator_t* comm, ompi_request_t** request,
                                   mca_coll_base_module_t* module);
int mca_coll_gpucoll_staged_ireduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                    struct ompi_datatype_t* dtype, struct ompi_op_t* op, int root,
                                    struct ompi_communicator_t* comm, ompi_request_t** request,
                                    mca_coll_base_module_t* module);

/* ---------------------------------------------------------------------------
 * Staging through host memory (coll_gpucoll_staged.c). Each function gets
 * the memory type of every buffer significant on this rank (at least one is
 * device memory), stages those, calls the saved host function and copies the
 * results back. Returns an OMPI error code.
 * ------------------------------------------------------------------------- */

int mca_coll_gpucoll_staged_allreduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                      struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                      struct ompi_communicator_t* comm,
                                      mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_bcast(void* buf, mca_coll_gpucoll_count_t count,
                                  struct ompi_datatype_t* dtype, int root,
                                  struct ompi_communicator_t* comm, mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_allgather(const void* sbuf, mca_coll_gpucoll_count_t scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf,
                                      mca_coll_gpucoll_count_t rcount,
                                      struct ompi_datatype_t* rdtype,
                                      struct ompi_communicator_t* comm,
                                      mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_reduce_scatter(const void* sbuf, void* rbuf,
                                           mca_coll_gpucoll_counts_t rcounts,
                                           struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                           struct ompi_communicator_t* comm,
                                           mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_reduce_scatter_block(
    const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* dtype,
    struct ompi_op_t* op, struct ompi_communicator_t* comm, mca_coll_gpucoll_module_t* m);
/* rbuf: only significant at the root. */
int mca_coll_gpucoll_staged_reduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                   struct ompi_datatype_t* dtype, struct ompi_op_t* op, int root,
                                   struct ompi_communicator_t* comm, mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_reduce_local(const void* inbuf, void* inoutbuf,
                                         mca_coll_gpucoll_count_t count,
                                         struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                         mca_coll_gpucoll_module_t* m);

/* Calls into the saved host module are bracketed by these, so that a saved
 * algorithm that calls back through comm->c_coll (e.g. reduce_scatter built
 * on reduce) reaches the saved function directly and is not counted as a
 * call of its own. Per thread. */
/* Inside a call of the saved host module on m's communicator: collectives
 * it makes on the same communicator (reduce_scatter built on reduce) go
 * straight through. Per module, not per thread: MPI forbids concurrent
 * collectives on one communicator, and a counter here costs no TLS lookup. */
static inline void mca_coll_gpucoll_enter_host(mca_coll_gpucoll_module_t* m) { ++m->host_depth; }
static inline void mca_coll_gpucoll_leave_host(mca_coll_gpucoll_module_t* m) { --m->host_depth; }
static inline bool mca_coll_gpucoll_in_host(const mca_coll_gpucoll_module_t* m) {
    return m->host_depth > 0;
}

/* ---------------------------------------------------------------------------
 * Accelerated path (coll_gpucoll_accel.c): device-to-device inside a node.
 * call describes the collective; all_device: whether all of the buffers this
 * rank uses are device memory (not all: this rank declines). Returns
 * OMPI_SUCCESS when the core did the call,
 * OMPI_ERR_NOT_AVAILABLE when it declined (the same answer on every rank:
 * stage or delegate as usual), or an error.
 * ------------------------------------------------------------------------- */
/* A call in which this rank passes no device memory: posts its decline to
 * the accelerated path (the other ranks may be waiting for it), without
 * describing the call. OMPI_SUCCESS, or an error if a peer failed it. */
/* Sets the core up again after GPUCOLL_REBIND at a blocking call or barrier
 * (where: the call, for verbose output); the new core, or NULL. */
gpucoll_comm_t* mca_coll_gpucoll_rebind(mca_coll_gpucoll_module_t* m,
                                        struct ompi_communicator_t* comm, const char* where);
/* gpucoll_comm_host_call answered GPUCOLL_REBIND: set up again, then ask again. */
int mca_coll_gpucoll_host_call_again(mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm,
                                     const void* a, const void* b, gpucoll_coll_t coll,
                                     int* device);
int mca_coll_gpucoll_decline(mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm,
                             gpucoll_coll_t coll);
/* For a call in which this rank passes some device memory. */
int mca_coll_gpucoll_accelerate(mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm,
                                gpucoll_call_t* call, bool all_device);
/* Fills call->dtype/op/eligible for a reduction of a predefined type and op. */
void mca_coll_gpucoll_describe_reduction(gpucoll_call_t* call, struct ompi_datatype_t* dtype,
                                         struct ompi_op_t* op);
/* Fills call->dtype/count/eligible for a data movement of count x dtype. */
void mca_coll_gpucoll_describe_bytes(gpucoll_call_t* call, size_t count,
                                     struct ompi_datatype_t* dtype);
void mca_coll_gpucoll_accel_release(mca_coll_gpucoll_module_t* m);
/* Sets the core of comm up if not tried yet (collective: every rank calls it
 * at the same point of comm's collective sequence). */
void mca_coll_gpucoll_accel_setup(mca_coll_gpucoll_module_t* m, struct ompi_communicator_t* comm);

/* The call each accelerated collective hands the core: fills *call (and *a,
 * when not NULL, with what a late staged call needs); sdev/rdev: this rank's
 * significant send/receive buffers are device memory. Returns whether every
 * buffer this rank uses is device memory (else this rank declines).
 * reduce_scatter: counts holds one entry per rank. */
struct mca_coll_gpucoll_args;
bool mca_coll_gpucoll_build_allreduce(gpucoll_call_t* call, struct mca_coll_gpucoll_args* a,
                                      bool sdev, bool rdev, const void* sbuf, void* rbuf,
                                      mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                      struct ompi_op_t* op);
bool mca_coll_gpucoll_build_bcast(gpucoll_call_t* call, struct mca_coll_gpucoll_args* a, bool dev,
                                  void* buf, mca_coll_gpucoll_count_t count,
                                  struct ompi_datatype_t* dtype, int root);
bool mca_coll_gpucoll_build_allgather(gpucoll_call_t* call, struct mca_coll_gpucoll_args* a,
                                      bool sdev, bool rdev, const void* sbuf,
                                      mca_coll_gpucoll_count_t scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf,
                                      mca_coll_gpucoll_count_t rcount,
                                      struct ompi_datatype_t* rdtype);
bool mca_coll_gpucoll_build_reduce_scatter(gpucoll_call_t* call, struct mca_coll_gpucoll_args* a,
                                           bool sdev, bool rdev, size_t* counts, const void* sbuf,
                                           void* rbuf, mca_coll_gpucoll_counts_t rcounts,
                                           struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                           struct ompi_communicator_t* comm);
bool mca_coll_gpucoll_build_reduce_scatter_block(gpucoll_call_t* call,
                                                 struct mca_coll_gpucoll_args* a, bool sdev,
                                                 bool rdev, const void* sbuf, void* rbuf,
                                                 mca_coll_gpucoll_count_t rcount,
                                                 struct ompi_datatype_t* dtype,
                                                 struct ompi_op_t* op);
bool mca_coll_gpucoll_build_reduce(gpucoll_call_t* call, struct mca_coll_gpucoll_args* a, bool sdev,
                                   bool rdev, bool at_root, const void* sbuf, void* rbuf,
                                   mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                   struct ompi_op_t* op, int root);

/* Reports a failure of the core (gpucoll_last_error()) and returns OMPI_ERROR. */
int mca_coll_gpucoll_core_error(const char* what, int status);

/* ---------------------------------------------------------------------------
 * MPI datatype and op -> gpucoll enums (coll_gpucoll_types.c). false when the
 * handle has no device equivalent (derived datatypes, user-defined ops,
 * MAXLOC/MINLOC, REPLACE, NO_OP, ...).
 * ------------------------------------------------------------------------- */

bool mca_coll_gpucoll_map_dtype(const struct ompi_datatype_t* dtype, gpucoll_dtype_t* out);
bool mca_coll_gpucoll_map_op(const struct ompi_op_t* op, gpucoll_op_t* out);

END_C_DECLS

#endif /* MCA_COLL_GPUCOLL_H */

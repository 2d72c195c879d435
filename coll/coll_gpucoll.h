/*
 * coll_gpucoll.h - the Open MPI collectives component coll/gpucoll.
 *
 * The component intercepts allreduce, bcast, allgather, reduce_scatter,
 * reduce_scatter_block, reduce and reduce_local. Per call it classifies the
 * buffers that are significant for this rank:
 *  - none is device memory  -> the saved (lower-priority) host function, untouched;
 *  - some are device memory -> staged through host memory (coll_gpucoll_staged.c),
 *    or, for reduce_local on two device buffers, reduced on the device.
 *
 * This is the only part of gpucoll that includes Open MPI's internal headers;
 * it talks to the core only through gpucoll.h.
 */
#ifndef MCA_COLL_GPUCOLL_H
#define MCA_COLL_GPUCOLL_H

#include <stdbool.h>
#include <stddef.h>

#include "gpucoll.h"
#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/mca/mca.h"
#include "ompi_config.h"
#include "opal/util/output.h"
#include "opal/util/proc.h"

BEGIN_C_DECLS

/* ---------------------------------------------------------------------------
 * Open MPI version glue. Everything that differs between coll interface
 * versions lives here: 4.1.x is coll 2.0.0 with module 2.3.0 and int counts
 * (5.0.x: coll 2.4.0, same function signatures; 6.0 changes the module API).
 * ------------------------------------------------------------------------- */
#define MCA_COLL_GPUCOLL_COLL_VERSION MCA_COLL_BASE_VERSION_2_0_0
typedef mca_coll_base_component_2_0_0_t mca_coll_gpucoll_base_component_t;

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
    int device_flags;  /* GPUCOLL_FLAGS_HOST, _DEVICE or _AUTO */
    int host_pipeline; /* -1 auto, 0 off, 1 on */
    size_t one_shot_max;
    size_t chain_min;
    size_t chunk_size;
    int ipc_cache_size;
    size_t ipc_cache_bytes; /* 0: the backend's default */
    int inter_algorithm;    /* 0 auto, 1 ring, 2 direct */
    size_t inter_chunk_size;
    size_t inter_direct_max;
    int inter_device_memory; /* 0 auto, 1 direct, 2 staged */

    /* state */
    int output;           /* opal_output stream, verbosity = verbose */
    bool backend_ready;   /* init_query found a device backend */
    bool thread_multiple; /* MPI_THREAD_MULTIPLE (init_query) */
} mca_coll_gpucoll_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_gpucoll_component_t mca_coll_gpucoll_component;

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

typedef struct mca_coll_gpucoll_module_t {
    mca_coll_base_module_t super;
    MCA_COLL_GPUCOLL_FOREACH_INTERCEPTED(MCA_COLL_GPUCOLL_DECLARE_PREV)
    /* accelerated path (coll_gpucoll_accel.c), created at the first call */
    gpucoll_comm_t* core;
    int core_state;      /* 0: not tried yet, 1: ready, -1: not available */
    bool uniform_memory; /* host calls skip the core: no agreement needed */
    int asserted_kinds;  /* info key mpi_assert_memory_alloc_kinds: GPUCOLL_ASSERT_* */
    int host_depth;      /* > 0: inside the saved host module (mca_coll_gpucoll_in_host) */
} mca_coll_gpucoll_module_t;

/* What the info key mpi_assert_memory_alloc_kinds promises for a communicator. */
enum { GPUCOLL_ASSERT_NONE = 0, GPUCOLL_ASSERT_DEVICE_ONLY = 1, GPUCOLL_ASSERT_HOST_ONLY = 2 };

OBJ_CLASS_DECLARATION(mca_coll_gpucoll_module_t);

/* A new module for comm with our functions installed. */
mca_coll_gpucoll_module_t* mca_coll_gpucoll_module_new(struct ompi_communicator_t* comm);

/* ---------------------------------------------------------------------------
 * Staging through host memory (coll_gpucoll_staged.c). Each function gets
 * the memory type of every buffer significant on this rank (at least one is
 * device memory), stages those, calls the saved host function and copies the
 * results back. Returns an OMPI error code.
 * ------------------------------------------------------------------------- */

int mca_coll_gpucoll_staged_allreduce(const void* sbuf, bool sdev, void* rbuf, bool rdev, int count,
                                      struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                      struct ompi_communicator_t* comm,
                                      mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_bcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                                  struct ompi_communicator_t* comm, mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_allgather(const void* sbuf, bool sdev, int scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf, bool rdev,
                                      int rcount, struct ompi_datatype_t* rdtype,
                                      struct ompi_communicator_t* comm,
                                      mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_reduce_scatter(const void* sbuf, bool sdev, void* rbuf, bool rdev,
                                           const int* rcounts, struct ompi_datatype_t* dtype,
                                           struct ompi_op_t* op, struct ompi_communicator_t* comm,
                                           mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_reduce_scatter_block(const void* sbuf, bool sdev, void* rbuf, bool rdev,
                                                 int rcount, struct ompi_datatype_t* dtype,
                                                 struct ompi_op_t* op,
                                                 struct ompi_communicator_t* comm,
                                                 mca_coll_gpucoll_module_t* m);
/* rbuf/rdev: only significant at the root (the caller passes NULL/false elsewhere). */
int mca_coll_gpucoll_staged_reduce(const void* sbuf, bool sdev, void* rbuf, bool rdev, int count,
                                   struct ompi_datatype_t* dtype, struct ompi_op_t* op, int root,
                                   struct ompi_communicator_t* comm, mca_coll_gpucoll_module_t* m);
int mca_coll_gpucoll_staged_reduce_local(const void* inbuf, bool indev, void* inoutbuf,
                                         bool inoutdev, int count, struct ompi_datatype_t* dtype,
                                         struct ompi_op_t* op, mca_coll_gpucoll_module_t* m);

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

/*
 * gpucoll.h - the plain C interface of libgpucoll.
 *
 * Two audiences:
 *  - applications and tests: device memory without writing CUDA
 *    (gpucoll_malloc_device / gpucoll_free_device / gpucoll_memcpy), the active
 *    backend and version, and per-process counters of which path each
 *    collective call took;
 *  - the Open MPI component coll/gpucoll: pointer classification, staging
 *    buffers, reductions. (Section "Component interface" below.)
 *
 * Every function that can fail returns 0 (GPUCOLL_SUCCESS) on success and a
 * gpucoll_status_t otherwise; gpucoll_last_error() then says what went wrong
 * and what to do, for the calling thread.
 */
#ifndef GPUCOLL_H
#define GPUCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUCOLL_VERSION_MAJOR 0
#define GPUCOLL_VERSION_MINOR 1
#define GPUCOLL_VERSION_PATCH 0

#if defined(__GNUC__)
#define GPUCOLL_EXPORT __attribute__((visibility("default")))
#else
#define GPUCOLL_EXPORT
#endif

typedef enum gpucoll_status {
    GPUCOLL_SUCCESS = 0,
    GPUCOLL_ERR_INVALID_ARG = 1,      /* NULL pointer, bad enum, size overflow */
    GPUCOLL_ERR_NO_BACKEND = 2,       /* no usable device backend (no GPU, emu not chosen) */
    GPUCOLL_ERR_BACKEND_CONFLICT = 3, /* a different backend is already active */
    GPUCOLL_ERR_OUT_OF_MEMORY = 4,
    GPUCOLL_ERR_UNSUPPORTED = 5, /* type/op/feature the backend cannot do: stage instead */
    GPUCOLL_ERR_NOT_FOUND = 6,   /* pointer not allocated by this backend */
    GPUCOLL_ERR_DEVICE = 7,      /* error reported by the device runtime */
    GPUCOLL_ERR_SYSTEM = 8,      /* OS call failed (mmap, memfd, shm, ...) */
    GPUCOLL_ERR_BOOTSTRAP = 9,   /* the out-of-band exchange failed */
    GPUCOLL_ERR_INTERNAL = 10,
    GPUCOLL_ERR_BUFFER = 11, /* a buffer does not fit inside its device allocation, or the
                                ranks describe different calls (MPI_ERR_BUFFER) */
    GPUCOLL_DECLINED = 100,  /* not an error: gpucoll_comm_run left the call to the caller */
    GPUCOLL_REBIND = 101     /* not an error: declined because a rank's buffers are on another
                                GPU than the one the communicator was set up on; every rank
                                returns it: destroy the communicator and create it again */
} gpucoll_status_t;

/* ---------------------------------------------------------------------------
 * Backend selection and identity
 * ------------------------------------------------------------------------- */

/* Chooses the device backend for this process: "auto" (cuda when a GPU is
 * present, otherwise none), "cuda" or "emu". NULL means: take it from the
 * environment, GPUCOLL_DEVICE first, then OMPI_MCA_coll_gpucoll_device, else
 * "auto". The first successful call (explicit or implicit through any other
 * function) fixes the backend for the life of the process; a later call that
 * asks for a different one fails with GPUCOLL_ERR_BACKEND_CONFLICT, so the
 * component and the application always agree. */
GPUCOLL_EXPORT int gpucoll_init_backend(const char* name);

/* "cuda", "emu" or "none" (auto found no GPU). Initialises from the
 * environment if nothing chose a backend yet. Never NULL. */
GPUCOLL_EXPORT const char* gpucoll_backend(void);

/* "major.minor.patch" of the library. */
GPUCOLL_EXPORT const char* gpucoll_version(void);

/* Message of the calling thread's last failure ("" if none). */
GPUCOLL_EXPORT const char* gpucoll_last_error(void);

/* ---------------------------------------------------------------------------
 * Device memory for applications
 * ------------------------------------------------------------------------- */

/* Host pages the backend's driver said it does not know (cuda: large
 * malloc'd or mmap'd host buffers) can be remembered, so that the next
 * query of a pointer there costs no driver call, while UCX's memory hooks
 * report every unmap. mode 0 (the default, until checked on a GPU): off,
 * and forgets what was remembered; 1: with UCX's hooks as they are
 * installed (UCX 1.13 installs them when libucm is loaded), if a probe sees
 * them report; 2: installs them if nobody has (at the first page). Call
 * before the backend is chosen. */
GPUCOLL_EXPORT void gpucoll_set_host_cache(int mode);
/* What the host page cache did in this process: pages kept, answers not
 * kept (unreadable, a shared object's, stale), and whether unmaps are
 * reported (1) or not (0: nothing is kept). NULL arguments are skipped. */
GPUCOLL_EXPORT void gpucoll_host_cache_stats(uint64_t* kept, uint64_t* refused, int* watching);

/* GPUs of the active backend this process can use (emu: 1); 0 without one. */
GPUCOLL_EXPORT int gpucoll_device_count(void);
/* Makes ordinal the calling thread's device for allocations and device work
 * (cuda: cudaSetDevice). */
GPUCOLL_EXPORT int gpucoll_set_device(int ordinal);
/* The calling thread's device (cuda: cudaGetDevice); -1 without a backend. */
GPUCOLL_EXPORT int gpucoll_current_device(void);
/* 1 if this process holds a context on GPU ordinal (cuda: its primary
 * context is active, i.e. it uses memory there), 0 if not, -1 on error.
 * Creates nothing. gpucoll creates none on a GPU the application did not
 * choose: a communicator set up before the process touched a GPU (with
 * several to choose from) waits for its first call on device buffers. */
GPUCOLL_EXPORT int gpucoll_device_has_context(int ordinal);
/* One rank per GPU, the usual way: the environment variable GPUCOLL_LOCAL_GPU
 * if set, else the node-local rank (OMPI_COMM_WORLD_LOCAL_RANK,
 * MPI_LOCALRANKID, SLURM_LOCALID, PMIX_LOCAL_RANK; 0 if none is set) modulo
 * the device count. Sets it as the calling thread's device; returns the
 * ordinal, or -1 (gpucoll_last_error() says why). */
GPUCOLL_EXPORT int gpucoll_select_local_device(void);

/* Allocates bytes of device memory (cudaMalloc, or emu memory that the host
 * cannot touch). bytes == 0 yields a valid unique pointer. */
GPUCOLL_EXPORT int gpucoll_malloc_device(void** ptr, size_t bytes);
/* Device memory that legacy CUDA IPC cannot export: a cudaMallocAsync pool
 * allocation, as PyTorch, JAX or Kokkos allocators hand to MPI (emu: an
 * allocation marked the same way). Collectives on it still run device to
 * device, through an exportable scratch copy. Free with gpucoll_free_device. */
GPUCOLL_EXPORT int gpucoll_malloc_device_pool(void** ptr, size_t bytes);
GPUCOLL_EXPORT int gpucoll_free_device(void* ptr);
/* Pinned host memory of the active backend (fast copies to and from the
 * device), for buffers that live long, e.g. a persistent request's staging
 * copies; free with gpucoll_free_host. */
GPUCOLL_EXPORT int gpucoll_malloc_host(void** ptr, size_t bytes);
GPUCOLL_EXPORT int gpucoll_free_host(void* ptr);
/* Copies bytes in any direction (host/device on either side), synchronously. */
GPUCOLL_EXPORT int gpucoll_memcpy(void* dst, const void* src, size_t bytes);
/* A part of a layout that gpucoll_memcpy_runs copies: height blocks of width
 * bytes, the first offset bytes from the base (negative offsets allowed),
 * each next one pitch bytes after the previous (pitch >= width; ignored when
 * height is 1). */
typedef struct gpucoll_copy_run {
    ptrdiff_t offset;
    size_t width;
    size_t height;
    size_t pitch;
} gpucoll_copy_run_t;
/* Copies the blocks of runs[0..nruns) from src + offset to dst + offset
 * (the same layout on both sides, any direction), synchronously, with one
 * wait for all of them: the bytes between the blocks are neither read nor
 * written. Blocks must not overlap. Each run is one copy (CUDA: a 2D copy
 * for height > 1). */
GPUCOLL_EXPORT int gpucoll_memcpy_runs(void* dst, const void* src, const gpucoll_copy_run_t* runs,
                                       size_t nruns);
/* GPUCOLL_SUCCESS when [ptr, ptr + bytes) is host memory or lies wholly
 * inside one device allocation; GPUCOLL_ERR_BUFFER otherwise, with a message
 * that names what (e.g. "receive buffer"), the range and the allocation. */
GPUCOLL_EXPORT int gpucoll_check_extent(const void* ptr, size_t bytes, const char* what);
/* The same for the span [ptr + lo, ptr + lo + bytes) of a buffer ptr (lo < 0:
 * a datatype with a negative lower bound): GPUCOLL_SUCCESS when ptr is host
 * memory or the whole span lies inside the one device allocation that holds
 * ptr; GPUCOLL_ERR_BUFFER when it begins below it or ends past it. */
GPUCOLL_EXPORT int gpucoll_check_span(const void* ptr, ptrdiff_t lo, size_t bytes,
                                      const char* what);

/* ---------------------------------------------------------------------------
 * Counters: which path each collective call took, per process
 * ------------------------------------------------------------------------- */

typedef enum gpucoll_coll {
    GPUCOLL_COLL_ALLREDUCE = 0,
    GPUCOLL_COLL_BCAST,
    GPUCOLL_COLL_ALLGATHER,
    GPUCOLL_COLL_REDUCE_SCATTER,
    GPUCOLL_COLL_REDUCE_SCATTER_BLOCK,
    GPUCOLL_COLL_REDUCE,
    GPUCOLL_COLL_REDUCE_LOCAL,
    /* Collectives that only the staged path serves (device buffers staged
     * through host memory, host buffers delegated). */
    GPUCOLL_COLL_ALLGATHERV,
    GPUCOLL_COLL_ALLTOALL,
    GPUCOLL_COLL_ALLTOALLV,
    GPUCOLL_COLL_ALLTOALLW,
    GPUCOLL_COLL_GATHER,
    GPUCOLL_COLL_GATHERV,
    GPUCOLL_COLL_SCATTER,
    GPUCOLL_COLL_SCATTERV,
    GPUCOLL_COLL_SCAN,
    GPUCOLL_COLL_EXSCAN,
    GPUCOLL_COLL_NEIGHBOR_ALLGATHER,
    GPUCOLL_COLL_NEIGHBOR_ALLGATHERV,
    GPUCOLL_COLL_NEIGHBOR_ALLTOALL,
    GPUCOLL_COLL_NEIGHBOR_ALLTOALLV,
    GPUCOLL_COLL_NEIGHBOR_ALLTOALLW,
    GPUCOLL_COLL_COUNT
} gpucoll_coll_t;

/* How a call was made: MPI_Allreduce, MPI_Iallreduce or MPI_Allreduce_init
 * (each MPI_Start of a persistent request counts as one call). */
typedef enum gpucoll_form {
    GPUCOLL_FORM_BLOCKING = 0,
    GPUCOLL_FORM_NONBLOCKING,
    GPUCOLL_FORM_PERSISTENT,
    GPUCOLL_FORM_COUNT
} gpucoll_form_t;

typedef enum gpucoll_path {
    GPUCOLL_PATH_ACCELERATED = 0, /* device-to-device inside gpucoll */
    GPUCOLL_PATH_STAGED,          /* device buffers staged through host memory */
    GPUCOLL_PATH_DELEGATED,       /* host buffers handed to the saved module */
    GPUCOLL_PATH_COUNT
} gpucoll_path_t;

typedef struct gpucoll_counters {
    /* calls[c][p]: number of calls of collective c that took path p */
    uint64_t calls[GPUCOLL_COLL_COUNT][GPUCOLL_PATH_COUNT];
    /* forms[f][p]: calls of any collective made in form f that took path p */
    uint64_t forms[GPUCOLL_FORM_COUNT][GPUCOLL_PATH_COUNT];
    uint64_t bytes_staged; /* bytes copied between device and host staging buffers */
    uint64_t bytes_peer;   /* bytes moved between peers of a node on the accelerated path */
    uint64_t bytes_inter;  /* bytes this process sent to other nodes on the accelerated path */
    uint64_t sync_rounds;  /* synchronisation rounds on the accelerated path */
    /* the most recent call of this process */
    gpucoll_coll_t last_coll;
    gpucoll_path_t last_path;
    gpucoll_form_t last_form;
    uint64_t last_bytes_peer;
    uint64_t last_bytes_inter;
    uint64_t last_sync_rounds;
    char last_algorithm[32]; /* "staged", "delegated", or the algorithm's name */
    /* accelerated persistent starts that reused their plan's setup (the
     * algorithm and the described buffers, gpucoll_plan_create) */
    uint64_t planned_starts;
} gpucoll_counters_t;

GPUCOLL_EXPORT int gpucoll_counters_get(gpucoll_counters_t* out);
GPUCOLL_EXPORT void gpucoll_counters_reset(void);
GPUCOLL_EXPORT const char* gpucoll_coll_name(gpucoll_coll_t coll);
GPUCOLL_EXPORT const char* gpucoll_path_name(gpucoll_path_t path);
GPUCOLL_EXPORT const char* gpucoll_form_name(gpucoll_form_t form);

/* Where the time of a call goes, step by step (coll_gpucoll_timing): on,
 * every accelerated call adds its steps' nanoseconds to a per-process table
 * (off: one relaxed load per step). gpucoll_timing_report writes the table's
 * text (a block per collective: each step's mean in microseconds and how
 * often it ran) into buf, NUL-terminated and cut to len, and returns the
 * length of the whole text. */
GPUCOLL_EXPORT void gpucoll_timing_enable(int on);
GPUCOLL_EXPORT void gpucoll_timing_reset(void);
GPUCOLL_EXPORT size_t gpucoll_timing_report(char* buf, size_t len);

/* ---------------------------------------------------------------------------
 * Component interface (used by coll/gpucoll; stable C, no MPI types)
 * ------------------------------------------------------------------------- */

typedef enum gpucoll_memtype {
    GPUCOLL_MEM_HOST = 0,  /* ordinary or pinned host memory */
    GPUCOLL_MEM_DEVICE = 1 /* memory only the device (backend) can touch */
} gpucoll_memtype_t;

/* Element types the device reductions know. */
typedef enum gpucoll_dtype {
    GPUCOLL_INT8 = 0,
    GPUCOLL_INT16,
    GPUCOLL_INT32,
    GPUCOLL_INT64,
    GPUCOLL_UINT8,
    GPUCOLL_UINT16,
    GPUCOLL_UINT32,
    GPUCOLL_UINT64,
    GPUCOLL_FLOAT,
    GPUCOLL_DOUBLE,
    GPUCOLL_LONG_DOUBLE,
    GPUCOLL_C_FLOAT_COMPLEX,
    GPUCOLL_C_DOUBLE_COMPLEX,
    GPUCOLL_C_LONG_DOUBLE_COMPLEX,
    GPUCOLL_BOOL,    /* C _Bool */
    GPUCOLL_BYTE,    /* MPI_BYTE: bitwise ops only */
    GPUCOLL_FLOAT16, /* IEEE binary16 (MPIX_C_FLOAT16, MPIX_SHORT_FLOAT): a reduction
                      * of several sources is combined in float and rounded once */
    GPUCOLL_DTYPE_COUNT
} gpucoll_dtype_t;

typedef enum gpucoll_op {
    GPUCOLL_OP_SUM = 0,
    GPUCOLL_OP_PROD,
    GPUCOLL_OP_MIN,
    GPUCOLL_OP_MAX,
    GPUCOLL_OP_LAND,
    GPUCOLL_OP_LOR,
    GPUCOLL_OP_LXOR,
    GPUCOLL_OP_BAND,
    GPUCOLL_OP_BOR,
    GPUCOLL_OP_BXOR,
    GPUCOLL_OP_COUNT
} gpucoll_op_t;

GPUCOLL_EXPORT size_t gpucoll_dtype_size(gpucoll_dtype_t dtype);
GPUCOLL_EXPORT const char* gpucoll_dtype_name(gpucoll_dtype_t dtype);
GPUCOLL_EXPORT const char* gpucoll_op_name(gpucoll_op_t op);
/* 1 if MPI defines op on dtype (e.g. MIN on complex: no; BAND on float: no). */
GPUCOLL_EXPORT int gpucoll_op_valid(gpucoll_dtype_t dtype, gpucoll_op_t op);

/* Classifies ptr for the active backend. A pointer the backend does not know
 * is host memory. With backend "none" every pointer is host memory. */
GPUCOLL_EXPORT gpucoll_memtype_t gpucoll_mem_type(const void* ptr);

/* A pinned host staging buffer of at least bytes, owned by the library and
 * reused between calls: slot 0..GPUCOLL_STAGING_SLOTS-1 lets one call hold
 * several buffers at once. Valid until the next call for the same slot or
 * gpucoll_staging_release(). Not thread-safe per slot. */
#define GPUCOLL_STAGING_SLOTS 4
GPUCOLL_EXPORT int gpucoll_staging_buffer(int slot, size_t bytes, void** host);
GPUCOLL_EXPORT void gpucoll_staging_release(void);

/* dst[i] = a[i] op b[i] for count elements, on the device (dst may equal a or b).
 * Every pointer must be device memory of the active backend
 * (GPUCOLL_ERR_INVALID_ARG otherwise: a GPU kernel cannot read pageable host
 * memory). GPUCOLL_ERR_UNSUPPORTED when the backend cannot do (dtype, op),
 * e.g. long double on CUDA: stage through host memory instead. Runs on dst's
 * GPU; an operand on another GPU is first copied there (a temporary). */
GPUCOLL_EXPORT int gpucoll_reduce(void* dst, const void* a, const void* b, size_t count,
                                  gpucoll_dtype_t dtype, gpucoll_op_t op);

/* Counter updates from the component (lock-free unless the algorithm's name
 * changes). bytes_staged: bytes copied between device and host for this call. */
GPUCOLL_EXPORT void gpucoll_counters_record(gpucoll_coll_t coll, gpucoll_path_t path,
                                            uint64_t bytes_staged, const char* algorithm);
/* The same for a nonblocking call or a persistent start. */
GPUCOLL_EXPORT void gpucoll_counters_record_form(gpucoll_coll_t coll, gpucoll_path_t path,
                                                 gpucoll_form_t form, uint64_t bytes_staged,
                                                 const char* algorithm);

/* ---------------------------------------------------------------------------
 * Communicators: the accelerated (device-to-device) path
 * ------------------------------------------------------------------------- */

/* What the core needs from the job. The component implements it with the
 * communicator's saved host module; tests implement it with threads or
 * processes. Every function returns 0 on success. */
typedef struct gpucoll_bootstrap {
    void* ctx;
    int rank;
    int size;
    /* recv receives size * bytes: every rank's bytes of send, in rank order */
    int (*allgather)(void* ctx, const void* send, void* recv, size_t bytes);
    int (*barrier)(void* ctx);
} gpucoll_bootstrap_t;

/* Algorithms of the accelerated path. AUTO lets the selection table choose by
 * collective and size; STAGED keeps a collective off the accelerated path. */
typedef enum gpucoll_algorithm {
    GPUCOLL_ALGO_AUTO = 0,
    GPUCOLL_ALGO_STAGED,
    GPUCOLL_ALGO_ONE_SHOT, /* allreduce: every rank reduces all inputs */
    GPUCOLL_ALGO_TWO_SHOT, /* allreduce: reduce-scatter then allgather, full mesh */
    GPUCOLL_ALGO_RING,     /* allreduce, reduce_scatter, allgather: neighbour ring */
    GPUCOLL_ALGO_DIRECT,   /* reduce_scatter, reduce, allgather, bcast: read peers directly */
    GPUCOLL_ALGO_CHAIN,    /* bcast: pipelined chain */
    /* Communicators that span nodes: */
    GPUCOLL_ALGO_HIER,   /* allreduce: intra reduce-scatter, inter allreduce on every rail
                            (ranks of equal local rank), intra allgather; bcast: inter among
                            one rank per node, then intra */
    GPUCOLL_ALGO_LEADER, /* allreduce, allgather: intra to local rank 0, inter among those
                            leaders, intra back (any number of ranks per node) */
    /* One node again: */
    GPUCOLL_ALGO_ONE_KERNEL, /* allreduce of small messages: one kernel per rank copies its
                                input into its slot, publishes a flag, waits for its peers'
                                flags on the GPU and reduces every slot (2-8 ranks; ranks
                                sharing a GPU only where their kernels run side by side, MPS) */
    GPUCOLL_ALGO_COUNT
} gpucoll_algorithm_t;

GPUCOLL_EXPORT const char* gpucoll_algorithm_name(gpucoll_algorithm_t algo);
/* GPUCOLL_ALGO_COUNT if name is unknown. */
GPUCOLL_EXPORT gpucoll_algorithm_t gpucoll_algorithm_from_name(const char* name);
/* 1 if algo can serve coll on the accelerated path (AUTO and STAGED: always). */
GPUCOLL_EXPORT int gpucoll_algorithm_valid(gpucoll_coll_t coll, gpucoll_algorithm_t algo);

/* gpucoll_comm_config_t.device_flags:
 * HOST: flags in shared host memory, polled by the CPU; each copy and
 *   reduction is issued and waited for between steps.
 * DEVICE: flags in device memory, written and awaited in stream order on the
 *   device (CUDA stream memory operations where the GPU has them, else
 *   one-thread kernels): a whole call is enqueued on one stream. Where ranks
 *   share a GPU and it lacks stream memory operations, host flags are used
 *   instead (a waiting kernel would starve the other ranks' work).
 * AUTO (default): DEVICE when every rank of the communicator has a GPU of its
 *   own, HOST when some ranks share one. */
#define GPUCOLL_FLAGS_HOST 0
#define GPUCOLL_FLAGS_DEVICE 1
#define GPUCOLL_FLAGS_AUTO 2

/* Bounds of gpucoll_comm_config_t.inter_chunk_bytes: each group between
 * nodes keeps 4 chunks per direction in pinned host memory. */
#define GPUCOLL_INTER_CHUNK_MIN_BYTES ((size_t)4096)
#define GPUCOLL_INTER_CHUNK_MAX_BYTES ((size_t)64 << 20)

typedef struct gpucoll_comm_config {
    /* forced algorithm per collective (GPUCOLL_ALGO_AUTO: selection table) */
    gpucoll_algorithm_t algorithm[GPUCOLL_COLL_COUNT];
    /* 1: the user asserts that on every call all ranks pass the same kind of
     * memory, so no agreement is needed (MPI 4.1 mpi_assert_memory_alloc_kinds) */
    int uniform_memory;
    size_t one_shot_max_bytes; /* allreduce: one-shot up to this size (0: the backend's default) */
    size_t chain_min_bytes;    /* bcast: pipelined chain from this size */
    size_t chunk_bytes;        /* pipeline chunk of chain and ring steps */
    size_t ipc_cache_entries;  /* bound of the per-process IPC mapping cache */
    size_t ipc_cache_bytes;    /* bytes of peers' allocations it keeps mapped (0: the
                                  backend's default: emu 1 GiB, cuda 1/8 of the GPU) */
    int verbose;               /* 0 silent; 1 selection per communicator; 10 per call */
    void (*log)(int level, const char* message); /* where verbose output goes (NULL: stderr) */
    /* Where the steps inside a call synchronise (GPUCOLL_FLAGS_*). */
    int device_flags;
    /* Host flags only: enqueue a call's copies and reductions on a stream and
     * publish each step when the work before it has finished (1), or issue
     * and wait for each one in turn (0); -1 (default): the backend's choice
     * (cuda pipelines; emu, whose "device" is the CPU the ranks poll on,
     * does not). */
    int host_pipeline;
    /* Between nodes (communicators that span nodes; UCX). */
    int inter_algorithm;           /* 0 auto, 1 ring, 2 direct (every member to every other) */
    size_t inter_chunk_bytes;      /* pipeline chunk of device memory staged through host,
                                      GPUCOLL_INTER_CHUNK_MIN_BYTES..GPUCOLL_INTER_CHUNK_MAX_BYTES
                                      (a value outside is taken as the nearer bound) */
    size_t inter_direct_max_bytes; /* auto: direct up to this many bytes per group member */
    /* Device memory between nodes: 0 auto (straight to UCX when UCX reports
     * CUDA support and every endpoint's transports can read device memory:
     * InfiniBand/RoCE with GPUDirect RDMA, cuda_ipc; else staged), 1 direct
     * (straight to UCX whenever it reports CUDA support), 2 staged (through
     * pinned host memory, chunk by chunk) */
    int inter_device_memory;
    int thread_multiple; /* 1: calls may come from several threads (MPI_THREAD_MULTIPLE) */
    /* 1: a thread of the library (one per communicator) advances
     * nonblocking and persistent calls while the application computes
     * between starting and completing them; 2: the same thread, lazy: it
     * steps in only after 10-20 ms without polling (no overlap to speak
     * of, but calls started on two communicators in different orders cannot
     * wait for each other forever); 0: they advance only inside gpucoll
     * calls (gpucoll_pending_test, gpucoll_comm_progress, blocking calls);
     * -1 (default): 1 where the machine has at least two cores per process
     * of the job on it, else 2. */
    int progress_thread;
    /* Called while a rank waits for its peers (NULL: nothing), so that the
     * job's own communication progresses: the component passes opal_progress.
     * Without it a peer blocked in a send that needs our progress would hang. */
    void (*progress)(void);
    /* The node's topology, for the choice of algorithm family and ring order
     * (NULL or "": discover this machine with hwloc and NVML where the backend
     * knows each rank's GPU). topology_file: an hwloc XML file; nvlink_file:
     * its NVLinks ("nvlink BUSID PEER N" lines). With the emu backend, which
     * has no PCI devices, rank r of a node plays GPU r of the file (or GPU
     * $GPUCOLL_EMU_GPU), so that machines we do not have can be studied. The
     * strings are read during gpucoll_comm_create only. */
    const char* topology_file;
    const char* nvlink_file;
    /* The cost model that picks algorithms (NULL or "": size thresholds and
     * the topology's family): a preset ("h100-nvswitch", "pcie4-workstation",
     * "emu") or a params file (contrib/calibrate.py writes one; the keys a
     * file leaves out come from the backend's preset: emu on emu,
     * h100-nvswitch on cuda). Every rank of a node communicator must load
     * the same parameters, or none uses them. A forced algorithm still wins.
     * Read during gpucoll_comm_create. */
    const char* cost_model;
    /* Between nodes, each process's UCX context uses only the RDMA NIC
     * (InfiniBand/RoCE, a port active) nearest its GPU (UCX_NET_DEVICES),
     * where the job has several processes on a machine, the topology is this
     * machine's, it has such a NIC and the user set no UCX_NET_DEVICES: 1
     * (default); 0: UCX's own choice (rail_devices ignored). A process
     * gets a UCX context per NIC its communicators ask for (kept until
     * gpucoll_finalize): one set up before the process chose its GPU leaves
     * the NIC to UCX, and is given its GPU's NIC when a call sets it up
     * again there. */
    int rails;
    /* The NIC of each GPU, as UCX_NET_DEVICES takes it: a comma-separated
     * list, entry i for the process's GPU i (modulo the list's length),
     * e.g. "mlx5_0:1,mlx5_1:1", or of "BUSID=NIC" entries naming GPUs by
     * PCI bus id (NULL or "": from the topology, as rails says). For machines whose PCI tree hwloc
     * cannot see (containers); wins over discovery, the one-process rule and the user's
     * UCX_NET_DEVICES. */
    const char* rail_devices;
    /* Bcast between nodes (among the node leaders): 0 auto (a pipelined
     * chain where its rounds beat the binomial tree's whole transfers: large
     * buffers on three or more nodes), 1 binomial tree, 2 chain (three or
     * more nodes). */
    int inter_bcast;
    /* A rank that waits this many seconds inside one blocking step of a
     * call for other ranks (their arrival in the call, a step, a verdict
     * from another node) says so once, naming whom it waits for: a rank
     * that never makes the call (a missing or mismatched collective, or a
     * host buffer under uniform_memory between nodes) cannot be told from a
     * late one, and this turns such a hang into a visible one. 0: never. */
    double wait_warning_s;
    /* Allreduce: the one-kernel path (GPUCOLL_ALGO_ONE_KERNEL) up to this
     * many bytes where the communicator can take it (0, the default: only
     * when forced). At most the one-shot slot. */
    size_t one_kernel_max_bytes;
    /* At most this many communicators of the process hold an accelerated
     * path at once (0, the default: no bound). Each holds device memory
     * (two one-shot slots), memory mappings and, on emu, a file descriptor;
     * thousands exhaust vm.max_map_count. A communicator created while any
     * of its ranks is at the bound has no accelerated path (its device
     * buffers are staged; said once per process), agreed by all its ranks. */
    int max_comms;
    /* Between nodes: a rank that waits this many seconds inside a call for
     * a peer on another node, with nothing from it meanwhile (its data, or
     * its node's verdict: the peer has not entered the call), fails the
     * call: the peer is unreachable (its link or node is down), stopped, or
     * that late (gpucoll cannot tell a late peer from a lost one). The call
     * fails on every rank that waits on it (each times out, or is told by a
     * node-mate or another node), with a message naming the rank and its
     * host. The error UCX itself reports for an endpoint (a refused or
     * reset connection) fails the call at once. 0: wait for ever. Default
     * 120. Blocking calls and the data of nonblocking ones; the wait of a
     * nonblocking call for its peers to enter it is not bounded. */
    double peer_timeout_s;
    /* The measured selection table auto follows on one node (per collective,
     * rank count, GPU sharing mode and size range: the algorithm, or staged,
     * a measurement found fastest; contrib/selection-table.py writes one):
     * NULL, "" or "auto" (default): the backend's built-in table where it
     * has one for the communicator (cuda: 2 and 4 ranks sharing one GPU,
     * from the H100 measurements; emu: none), unless cost_model is set;
     * "none": no table; else a file. A forced algorithm wins; sizes the
     * table leaves out fall back to the cost model and the size thresholds.
     * Every rank of a node communicator must read the same rules, or none
     * uses them. Read during gpucoll_comm_create. */
    const char* selection_file;
} gpucoll_comm_config_t;

/* Defaults of every field. */
GPUCOLL_EXPORT void gpucoll_comm_config_init(gpucoll_comm_config_t* config);

typedef struct gpucoll_comm gpucoll_comm_t;

/* Collective over the bootstrap's ranks. Ranks whose node identity differs
 * (boot id and host name, or the environment variable GPUCOLL_HOSTID where
 * set) are on different nodes: IPC inside each node, UCX between them.
 * *out is NULL (and 0 returned) when the accelerated path cannot serve this
 * group (no device backend; several nodes and no working UCX); every rank
 * then gets NULL. */
GPUCOLL_EXPORT int gpucoll_comm_create(const gpucoll_bootstrap_t* bootstrap,
                                       const gpucoll_comm_config_t* config, gpucoll_comm_t** out);
/* Local; releases the shared segment, scratch buffers and their mappings. */
GPUCOLL_EXPORT void gpucoll_comm_destroy(gpucoll_comm_t* comm);

/* One collective call. Every rank of the communicator calls gpucoll_comm_run
 * (or, passing no device memory, gpucoll_comm_decline) for every call of the
 * collective, unless the communicator was created with uniform_memory. */
typedef struct gpucoll_call {
    gpucoll_coll_t coll;
    const void* sendbuf;   /* NULL: MPI_IN_PLACE (or no send buffer: bcast) */
    void* recvbuf;         /* bcast: the buffer */
    size_t count;          /* elements; allgather: per rank; bcast: elements of buf */
    const size_t* counts;  /* reduce_scatter: size entries (elements per rank) */
    gpucoll_dtype_t dtype; /* bcast and allgather: GPUCOLL_BYTE with count in bytes is fine */
    gpucoll_op_t op;       /* reductions only */
    int root;              /* bcast, reduce */
    int eligible;          /* 0: this rank cannot take the accelerated path (derived
                              datatype, user op, host buffers...): all ranks decline together.
                              Ineligible calls still describe the same bytes as the
                              other ranks' (e.g. GPUCOLL_BYTE x total bytes). */
    int on_device;         /* 1: the caller found every buffer of this rank that the call
                              uses to be device memory (the core checks them anyway: range) */
} gpucoll_call_t;

/* Runs call on the accelerated path. Returns
 *   GPUCOLL_SUCCESS   done, results in place;
 *   GPUCOLL_DECLINED  the accelerated path declined it on every rank: the
 *                     caller handles it (host buffers: saved module, device
 *                     buffers: staging) — the same answer on every rank;
 *   GPUCOLL_REBIND    nothing was done, on every rank: every rank passed device
 *                     memory, but some rank's is on another GPU than the one
 *                     current when comm was created (the application chose its
 *                     GPU after its first collective), or a nonblocking call
 *                     before this one found that (see gpucoll_comm_settle). The
 *                     caller destroys comm and creates it again (collective; on
 *                     the GPU of the buffers that asked for it, else the one
 *                     current now on each rank), then runs the call again;
 *   other             failure (every rank fails, no hang).
 * The work runs on the GPU that was current when comm was created, whatever
 * the calling thread's current GPU (restored on return). */
GPUCOLL_EXPORT int gpucoll_comm_run(gpucoll_comm_t* comm, const gpucoll_call_t* call);
/* The cheap form of gpucoll_comm_run for a rank that passes no device
 * memory in this call: posts its decline and returns GPUCOLL_DECLINED (or an
 * error if a peer failed this very call). Every rank makes one of the two
 * calls for every collective call on the communicator. GPUCOLL_REBIND, as
 * gpucoll_comm_run returns it, where a nonblocking call asked for it: then
 * nothing was posted; create comm again and decline on the new one. */
GPUCOLL_EXPORT int gpucoll_comm_decline(gpucoll_comm_t* comm);
/* A nonblocking or persistent call cannot set a communicator up again (that
 * waits for every rank): one whose buffers are on another GPU than comm's is
 * staged, and the next blocking call on comm (gpucoll_comm_run, _decline,
 * _host_call) answers GPUCOLL_REBIND on every rank. A barrier (or any
 * blocking operation every rank of comm makes in the same order) calls
 * this: the calls started before it end, then GPUCOLL_REBIND where one asked
 * for it (create comm again), else GPUCOLL_SUCCESS; an error where a call
 * failed. Cheap when nothing was started. */
GPUCOLL_EXPORT int gpucoll_comm_settle(gpucoll_comm_t* comm);
/* The host-buffer fast path of a blocking call, in one call: when neither
 * a nor b (either may be NULL) is device memory, posts this rank's decline as
 * gpucoll_comm_decline does (not when comm is NULL: no core, or host calls
 * asserted to skip it), counts the call as delegated, and returns
 * GPUCOLL_DECLINED: hand it to the host module. Returns GPUCOLL_SUCCESS,
 * having done nothing else, when a or b is device memory: take the full path
 * (gpucoll_comm_run, staging); *device then says which (bit 0: a, bit 1: b),
 * so that the caller need not ask again. Other values: the decline's answer
 * (an error, or GPUCOLL_REBIND: create comm again and call this again).
 * device may be NULL. */
GPUCOLL_EXPORT int gpucoll_comm_host_call(gpucoll_comm_t* comm, const void* a, const void* b,
                                          gpucoll_coll_t coll, int* device);

/* The host-buffer fast path, inline in the caller's code.
 *
 * gpucoll_comm_host_call costs a call into this library per host-buffer
 * collective, and that call alone was about half of what gpucoll added to a
 * 1 KiB host allreduce (about 50 cycles of ~60, timed inside the call on a
 * 2-core VM: reaching another library's code, not the work there). The
 * gate does the same in the caller: each communicator of one node has one,
 * owned by the core and laid out for this path (the first cache line holds
 * everything it reads, and the counts of allreduce and bcast). The caller keeps
 * the pointer gpucoll_comm_host_gate gave it, for as long as comm lives. */
#define GPUCOLL_GATE_STEP_BITS 20 /* progress word: call << GPUCOLL_GATE_STEP_BITS | step */
/* The process's last-call word (gpucoll_counters_t's last_* fields): a
 * delegated call writes only this word; a call on gpucoll's own paths also
 * writes the details and sets GPUCOLL_LAST_CALL_DETAILED. */
#define GPUCOLL_LAST_CALL_DETAILED (UINT64_C(1) << 63)
#define GPUCOLL_LAST_CALL_WORD(coll, path, form) \
    ((uint64_t)(coll) | ((uint64_t)(path) << 8) | ((uint64_t)(form) << 16))

/* Where a backend's device memory lies: [lo, hi) holds all of it; an address
 * outside is host memory for sure. Grows as memory is allocated (read
 * atomically). */
typedef struct gpucoll_device_span {
    uintptr_t lo, hi;
} gpucoll_device_span_t;

typedef struct gpucoll_host_gate {
    /* First cache line: what each host call reads. */
    uint64_t seq;  /* the last call this rank posted (written by the calling thread) */
    uint32_t busy; /* atomic; not 0: calls are queued or a rebind is pending: ask the core */
    uint32_t unused;
    const gpucoll_device_span_t* span; /* the backend's device span */
    uint64_t* progress;                /* this rank's progress word in the node's segment */
    const uint64_t* abort;             /* the call a rank failed after posting (0: none) */
    uint64_t* last_call;               /* the process's last-call word */
    /* Host calls handed to the host module, by collective (read by
     * gpucoll_counters_get). */
    uint64_t delegated[GPUCOLL_COLL_COUNT];
} gpucoll_host_gate_t;

/* comm's gate, or NULL where host calls must take gpucoll_comm_host_call
 * (communicators that span nodes, a backend without a device span, such as
 * CUDA, and builds for ThreadSanitizer). The caller passes
 * GPUCOLL_HOST_GATE_VERSION and sizeof(gpucoll_host_gate_t) as it was
 * compiled with: NULL where they differ from the library's (the gate's
 * layout and constants are compiled into the caller). */
#define GPUCOLL_HOST_GATE_VERSION 3
GPUCOLL_EXPORT gpucoll_host_gate_t* gpucoll_comm_host_gate(gpucoll_comm_t* comm, int version,
                                                           size_t gate_bytes);
/* The error of a call that a peer failed (rare: out of line). */
GPUCOLL_EXPORT int gpucoll_host_gate_failed(void);

/* gpucoll_comm_host_call through the gate: GPUCOLL_DECLINED when neither a
 * nor b is device memory (either may be NULL or any other address below
 * 4096, such as MPI_IN_PLACE: host memory) (the decline posted and the call counted: hand it
 * to the host module), an error where a peer failed this call, and
 * GPUCOLL_SUCCESS, having done nothing, when the gate cannot tell: ask
 * gpucoll_comm_host_call. The same protocol as the core's decline. */
static inline int gpucoll_host_gate_call(gpucoll_host_gate_t* g, const void* a, const void* b,
                                         gpucoll_coll_t coll) {
    if ((unsigned)coll >= (unsigned)GPUCOLL_COLL_COUNT) return GPUCOLL_SUCCESS;
    /* p lies in [lo, hi) where p - lo < hi - lo (unsigned): one comparison
     * per buffer, and none of the span's own edge cases can make it wrong
     * on the host side: NULL and MPI_IN_PLACE (1) lie below every mapping,
     * a span with nothing in it is {UINTPTR_MAX, 0} (width 1, which holds
     * no address but UINTPTR_MAX), and one that a growth made lo > hi for a
     * moment (the first, lo stored before hi) holds every address from lo
     * up, all the device memory there is (the core decides for those). */
    const gpucoll_device_span_t* span = g->span;
    const uintptr_t lo = __atomic_load_n(&span->lo, __ATOMIC_ACQUIRE);
    const uintptr_t width = __atomic_load_n(&span->hi, __ATOMIC_ACQUIRE) - lo;
    if ((uintptr_t)a - lo < width || (uintptr_t)b - lo < width) return GPUCOLL_SUCCESS;
    if (__atomic_load_n(&g->busy, __ATOMIC_ACQUIRE) != 0) return GPUCOLL_SUCCESS;
    /* A decline posts only its progress word: it overwrites no post, so it
     * waits for no peer. */
    const uint64_t seq = ++g->seq;
    __atomic_store_n(g->progress, seq << GPUCOLL_GATE_STEP_BITS, __ATOMIC_RELEASE);
    if (__atomic_load_n(g->abort, __ATOMIC_ACQUIRE) == seq) return gpucoll_host_gate_failed();
    /* The calling thread is the only writer; gpucoll_counters_get reads it. */
    __atomic_store_n(&g->delegated[coll],
                     __atomic_load_n(&g->delegated[coll], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    __atomic_store_n(g->last_call,
                     GPUCOLL_LAST_CALL_WORD(coll, GPUCOLL_PATH_DELEGATED, GPUCOLL_FORM_BLOCKING),
                     __ATOMIC_RELAXED);
    return GPUCOLL_DECLINED;
}

/* Nonblocking calls (MPI_Iallreduce, MPI_Start of a persistent request).
 * Calls of a rank end in the order they were
 * started, blocking ones included (gpucoll_comm_run and _decline first end
 * every call started before them). Nothing here waits for a peer: a call is
 * posted once every earlier call of this rank has ended, and run once every
 * rank's post is visible, inside gpucoll_pending_test / gpucoll_comm_progress,
 * or on the library's progress thread (gpucoll_comm_config_t.progress_thread)
 * while the application does something else. On a communicator that spans
 * nodes, the nodes' verdicts on a call are exchanged there too, without
 * waiting; such communicators need the progress thread (not 0). */
typedef struct gpucoll_pending gpucoll_pending_t;
/* Starts call (form: how the application made it, for the counters).
 * GPUCOLL_SUCCESS with *op; GPUCOLL_ERR_UNSUPPORTED where
 * gpucoll_comm_nonblocking says 0 (stage the call instead: the same answer
 * on every rank). */
GPUCOLL_EXPORT int gpucoll_comm_start(gpucoll_comm_t* comm, const gpucoll_call_t* call,
                                      gpucoll_form_t form, gpucoll_pending_t** op);
/* Persistent calls (MPI_Allreduce_init and the others): set up once, started
 * many times. gpucoll_plan_create chooses the algorithm and checks and
 * describes the call's device buffers for peers (what gpucoll_comm_start does
 * on every call), locally: it waits for nobody. A plan whose buffers cannot
 * be described once (memory IPC cannot export, host memory, a buffer that
 * does not fit its allocation) is still valid: each start then does that work
 * and gets the answer gpucoll_comm_start would. GPUCOLL_ERR_UNSUPPORTED on a
 * communicator that spans nodes (start each call with gpucoll_comm_start
 * instead, where gpucoll_comm_nonblocking says 1). The buffers must
 * stay allocated while the plan lives (as MPI requires of persistent
 * requests). */
typedef struct gpucoll_plan gpucoll_plan_t;
GPUCOLL_EXPORT int gpucoll_plan_create(gpucoll_comm_t* comm, const gpucoll_call_t* call,
                                       gpucoll_plan_t** plan);
/* gpucoll_comm_start of the planned call (form persistent), on the
 * communicator it was made for (else GPUCOLL_ERR_INVALID_ARG). */
GPUCOLL_EXPORT int gpucoll_plan_start(gpucoll_comm_t* comm, gpucoll_plan_t* plan,
                                      gpucoll_pending_t** op);
/* 1 if plan was made for comm (not for a communicator set up again since). */
GPUCOLL_EXPORT int gpucoll_plan_matches(const gpucoll_comm_t* comm, const gpucoll_plan_t* plan);
/* Frees the plan; a start still in flight keeps what it needs. NULL: no-op. */
GPUCOLL_EXPORT void gpucoll_plan_free(gpucoll_plan_t* plan);
/* The nonblocking form of gpucoll_comm_decline (a rank with host buffers). */
GPUCOLL_EXPORT int gpucoll_comm_start_decline(gpucoll_comm_t* comm);
/* Advances the queued calls of op's communicator. *done = 1 once op has
 * ended; the result is then that of gpucoll_comm_run (SUCCESS, DECLINED: the
 * caller runs the call another way, the same answer on every rank, or an
 * error). */
GPUCOLL_EXPORT int gpucoll_pending_test(gpucoll_pending_t* op, int* done);
/* 1 once op has ended, without advancing anything (nor counting as the
 * application polling, which keeps the progress thread away). */
GPUCOLL_EXPORT int gpucoll_pending_done(const gpucoll_pending_t* op);
GPUCOLL_EXPORT void gpucoll_pending_free(gpucoll_pending_t* op);
/* Advances the queued calls of comm; 1 when none is left. */
GPUCOLL_EXPORT int gpucoll_comm_progress(gpucoll_comm_t* comm);
/* 1 when comm lives on one node. */
GPUCOLL_EXPORT int gpucoll_comm_single_node(const gpucoll_comm_t* comm);
/* 1 when nonblocking and persistent calls can go through comm
 * (gpucoll_comm_start): one node, or several with the progress thread not
 * off (the same answer on every rank configured alike). */
GPUCOLL_EXPORT int gpucoll_comm_nonblocking(const gpucoll_comm_t* comm);

/* ---------------------------------------------------------------------------
 * Streams and stream-ordered collectives (docs/streams.md)
 * ------------------------------------------------------------------------- */

/* A stream of the active backend for the application, as a native handle:
 * a cudaStream_t (non-blocking) on cuda, a handle of an emulated stream on
 * emu (whose work runs on a worker thread, in order). */
GPUCOLL_EXPORT int gpucoll_stream_create(void** stream);
/* Work already enqueued still runs. */
GPUCOLL_EXPORT int gpucoll_stream_destroy(void* stream);
/* Waits for the work enqueued so far; returns the first error of that work. */
GPUCOLL_EXPORT int gpucoll_stream_synchronize(void* stream);
/* Copies bytes (any direction) after the work enqueued before, in stream
 * order; host memory must stay valid until the stream has passed it. */
GPUCOLL_EXPORT int gpucoll_memcpy_async(void* dst, const void* src, size_t bytes, void* stream);
/* Test aid: work enqueued after this starts once *word (host memory another
 * thread writes) is at least value: a held stream. */
GPUCOLL_EXPORT int gpucoll_stream_wait_host(void* stream, const uint32_t* word, uint32_t value);

/* Communicators by key (the component registers each one whose core it set
 * up, under its MPI_Comm handle, and forgets it before destroying it), so
 * that libgpucoll_mpix finds the core of an MPI communicator without MPI
 * types reaching the core. */
GPUCOLL_EXPORT void gpucoll_comm_register_key(uint64_t key, gpucoll_comm_t* comm);
GPUCOLL_EXPORT void gpucoll_comm_forget_key(uint64_t key);

/* A stream-ordered communicator: calls enqueued on one application stream,
 * run there entirely (one node), in order. Collective over bootstrap; key:
 * the registered communicator it serves (0: none checked, for tests
 * without the component). Always made where the arguments are valid: one
 * that cannot take stream-ordered calls (the component not active there,
 * several nodes, an unusable stream on some rank) refuses every call with
 * the reason, the same on every rank. */
typedef struct gpucoll_stream_comm gpucoll_stream_comm_t;
GPUCOLL_EXPORT int gpucoll_stream_comm_create(const gpucoll_bootstrap_t* bootstrap, uint64_t key,
                                              void* stream, gpucoll_stream_comm_t** out);
/* Waits until the stream has passed every call enqueued (and the peers
 * have read this rank's part), then frees. */
GPUCOLL_EXPORT void gpucoll_stream_comm_destroy(gpucoll_stream_comm_t* comm);
/* Enqueues call (allreduce, bcast, allgather, reduce_scatter(_block),
 * reduce) and returns at once. GPUCOLL_ERR_UNSUPPORTED where the device path
 * refuses it (host buffers, types, ops), with the reason; an error once a
 * call failed on the stream (any rank's). */
GPUCOLL_EXPORT int gpucoll_stream_comm_enqueue(gpucoll_stream_comm_t* comm,
                                               const gpucoll_call_t* call);
/* GPUCOLL_SUCCESS, or the failure found on the stream (gpucoll_last_error). */
GPUCOLL_EXPORT int gpucoll_stream_comm_status(gpucoll_stream_comm_t* comm);

/* Shuts the inter-node transport down (endpoints, worker): call once no
 * communicator is left, before the job's own network goes (the component
 * does at close). Communicators created after it stay on one node. */
GPUCOLL_EXPORT void gpucoll_finalize(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUCOLL_H */

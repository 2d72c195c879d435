/*
 * coll_gpucoll_component.c - the component: MCA parameters, backend
 * initialisation, and the per-communicator decision to take part.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "coll_gpucoll.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/util/info.h"

static int gpucoll_register(void);
static int gpucoll_open(void);
static int gpucoll_close(void);

mca_coll_gpucoll_component_t mca_coll_gpucoll_component = {
    .super =
        {
            .collm_version =
                {
                    MCA_COLL_GPUCOLL_COLL_VERSION,
                    .mca_component_name = "gpucoll",
                    MCA_BASE_MAKE_VERSION(component, GPUCOLL_VERSION_MAJOR, GPUCOLL_VERSION_MINOR,
                                          GPUCOLL_VERSION_PATCH),
                    .mca_open_component = gpucoll_open,
                    .mca_close_component = gpucoll_close,
                    .mca_register_component_params = gpucoll_register,
                },
            .collm_data = {MCA_BASE_METADATA_PARAM_NONE},
            .collm_init_query = mca_coll_gpucoll_init_query,
            .collm_comm_query = mca_coll_gpucoll_comm_query,
        },
    /* Above tuned (30), cuda (78) and hcoll (90); never 100 (ties sort unpredictably). */
    .priority = 95,
    .device = MCA_COLL_GPUCOLL_DEVICE_AUTO,
    .verbose = 0,
    .algorithm = {GPUCOLL_ALGO_AUTO},
    .uniform_memory = false,
    .host_cache = 0, /* off until checked on a GPU */
    .device_flags = GPUCOLL_FLAGS_AUTO,
    .host_pipeline = -1,
    .progress_thread = -1,
    .rails = true,
    .wait_warning = 60,
    .max_comms = 256,
    .peer_timeout = 120,
    .version_check = MCA_COLL_GPUCOLL_VERSION_CHECK_EXACT,
    .one_shot_max = 0,
    .chain_min = 8 * 1024 * 1024,
    .chunk_size = 1024 * 1024,
    .ipc_cache_size = 128,
    .ipc_cache_bytes = 0,
    .inter_algorithm = 0,
    .inter_chunk_size = 1024 * 1024,
    .inter_direct_max = 16 * 1024,
    .inter_device_memory = 0,
    .inter_bcast = 0,
    .selection_file = "auto", /* Open MPI copies it at registration */
    .output = -1,
    .backend_ready = false,
};

/* ---------------------------------------------------------------------------
 * MCA parameters: the whole table. Defaults are the initial values above.
 * ------------------------------------------------------------------------- */

static const mca_base_var_enum_value_t gpucoll_device_values[] = {
    {MCA_COLL_GPUCOLL_DEVICE_AUTO, "auto"},
    {MCA_COLL_GPUCOLL_DEVICE_CUDA, "cuda"},
    {MCA_COLL_GPUCOLL_DEVICE_EMU, "emu"},
    {0, NULL},
};

static const mca_base_var_enum_value_t gpucoll_algorithm_values[] = {
    {GPUCOLL_ALGO_AUTO, "auto"},
    {GPUCOLL_ALGO_STAGED, "staged"},
    {GPUCOLL_ALGO_ONE_SHOT, "one_shot"},
    {GPUCOLL_ALGO_TWO_SHOT, "two_shot"},
    {GPUCOLL_ALGO_RING, "ring"},
    {GPUCOLL_ALGO_DIRECT, "direct"},
    {GPUCOLL_ALGO_CHAIN, "chain"},
    {GPUCOLL_ALGO_HIER, "hier"},
    {GPUCOLL_ALGO_LEADER, "leader"},
    {GPUCOLL_ALGO_ONE_KERNEL, "one_kernel"},
    {0, NULL},
};

static const mca_base_var_enum_value_t gpucoll_inter_device_memory_values[] = {
    {0, "auto"},
    {1, "direct"},
    {2, "staged"},
    {0, NULL},
};

static const mca_base_var_enum_value_t gpucoll_inter_algorithm_values[] = {
    {0, "auto"},
    {1, "ring"},
    {2, "direct"},
    {0, NULL},
};

static const mca_base_var_enum_value_t gpucoll_inter_bcast_values[] = {
    {0, "auto"},
    {1, "tree"},
    {2, "chain"},
    {0, NULL},
};

static const mca_base_var_enum_value_t gpucoll_progress_thread_values[] = {
    {-1, "auto"}, {0, "off"}, {1, "on"}, {2, "lazy"}, {0, NULL},
};

static const mca_base_var_enum_value_t gpucoll_auto_off_on_values[] = {
    {-1, "auto"},
    {0, "off"},
    {1, "on"},
    {0, NULL},
};

static const mca_base_var_enum_value_t gpucoll_flags_values[] = {
    {GPUCOLL_FLAGS_HOST, "host"},
    {GPUCOLL_FLAGS_DEVICE, "device"},
    {GPUCOLL_FLAGS_AUTO, "auto"},
    {0, NULL},
};

typedef struct gpucoll_param {
    const char* name;
    const char* help;
    mca_base_var_type_t type;
    const mca_base_var_enum_value_t* values; /* enum parameters only */
    mca_base_var_info_lvl_t level;
    mca_base_var_scope_t scope;
    void* storage;
} gpucoll_param_t;

static const gpucoll_param_t gpucoll_params[] = {
    {"priority",
     "Priority of the gpucoll coll component (default 95: above tuned, cuda and hcoll, so that "
     "device buffers never reach a component that cannot handle them). A negative value "
     "disables the component; so does --mca coll ^gpucoll.",
     MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_coll_gpucoll_component.priority},
    {"device",
     "Device backend for GPU buffers: auto (CUDA if a GPU is present, otherwise the component "
     "stays out of the way at no cost; GPUCOLL_DEVICE, if set, decides), cuda, or emu (an "
     "emulated device in host memory, for testing without a GPU). If the application allocates "
     "device memory through gpucoll.h (gpucoll_malloc_device), this must match the "
     "application's GPUCOLL_DEVICE. 'mpirun --mca coll_gpucoll_device emu' also reaches the "
     "application, since libgpucoll reads OMPI_MCA_coll_gpucoll_device when GPUCOLL_DEVICE is "
     "not set (a value set only in an MCA parameter file does not).",
     MCA_BASE_VAR_TYPE_INT, gpucoll_device_values, OPAL_INFO_LVL_3, MCA_BASE_VAR_SCOPE_READONLY,
     &mca_coll_gpucoll_component.device},
    {"verbose",
     "Verbosity of the gpucoll coll component: 0 silent, 1 selection decision per "
     "communicator, 10 path and sizes of every call.",
     MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.verbose},
#define GPUCOLL_ALGORITHM_PARAM(name, id, choices)                               \
    {                                                                            \
#name "_algorithm",                                                      \
            "Algorithm of " #name                                                \
            " on device buffers: auto (by size and shape), staged (copy to "     \
            "host memory and use Open MPI's own algorithm), or " choices ".",    \
            MCA_BASE_VAR_TYPE_INT, gpucoll_algorithm_values, OPAL_INFO_LVL_5,    \
            MCA_BASE_VAR_SCOPE_ALL_EQ, &mca_coll_gpucoll_component.algorithm[id] \
    }
    GPUCOLL_ALGORITHM_PARAM(allreduce, GPUCOLL_COLL_ALLREDUCE,
                            "one_shot (one round; small), two_shot (reduce-scatter + allgather "
                            "over all peers; large), ring (neighbours only; PCIe) inside a "
                            "node; between nodes hier (intra reduce-scatter, inter allreduce "
                            "per local rank, intra allgather; equal ranks per node) or leader "
                            "(through local rank 0 of every node); one_kernel (small messages "
                            "in one kernel launch per rank, see allreduce_one_kernel_max; "
                            "where the communicator cannot take it, one_shot)"),
    GPUCOLL_ALGORITHM_PARAM(bcast, GPUCOLL_COLL_BCAST,
                            "direct (all read the root), chain (pipelined chain; large) inside "
                            "a node; between nodes auto picks hier (binomial tree among one "
                            "rank per node, then intra)"),
    GPUCOLL_ALGORITHM_PARAM(allgather, GPUCOLL_COLL_ALLGATHER,
                            "direct (all read all), ring inside a node; between nodes leader"),
    GPUCOLL_ALGORITHM_PARAM(reduce_scatter, GPUCOLL_COLL_REDUCE_SCATTER,
                            "direct (each reduces its block from all), ring"),
    GPUCOLL_ALGORITHM_PARAM(reduce_scatter_block, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK,
                            "direct (each reduces its block from all), ring"),
    GPUCOLL_ALGORITHM_PARAM(reduce, GPUCOLL_COLL_REDUCE, "direct (the root reduces all)"),
#undef GPUCOLL_ALGORITHM_PARAM
    {"uniform_memory",
     "Assert that on every collective call all ranks pass the same kind of memory (all device "
     "or all host buffers). On communicators that span nodes, host-buffer calls then skip "
     "gpucoll entirely, without the per-call message between nodes that tells device ranks "
     "elsewhere they are declined; a wrong assertion there hangs the other ranks (they say so "
     "after coll_gpucoll_wait_warning seconds). On one node it changes "
     "nothing (the agreement is a store to shared memory, and a rank that breaks the "
     "assertion must not hang the others).",
     MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.uniform_memory},
    {"host_cache",
     "cuda: remember the host pages the driver said it does not know (large malloc'd or "
     "mmap'd host buffers, such as the OSU benchmarks'), so that a collective on host buffers "
     "does not ask the driver about them at every call (about 0.2 us per buffer). A page is "
     "forgotten when UCX's memory hooks report it is about to be unmapped (unmaps by raw "
     "system call are not seen; pages of shared objects are never remembered). auto: with "
     "UCX's hooks as they are installed (UCX 1.13 installs them when its libucm is loaded), "
     "if a probe sees them report a munmap, a MAP_FIXED mmap, an mremap and a free(); on: "
     "install them if nobody has (at the first page; they patch mmap/munmap for the whole "
     "process); off (the default until checked on a GPU): ask the driver at every call. No "
     "effect on emu.",
     MCA_BASE_VAR_TYPE_INT, gpucoll_auto_off_on_values, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.host_cache},
    {"flags",
     "Where the ranks of a node synchronise the steps of a collective: host (flags in shared "
     "host memory, polled by the CPU; each copy and reduction is waited for between steps), "
     "device (flags in device memory, written and awaited in stream order on the GPU with "
     "CUDA stream memory operations: a whole call is enqueued on one stream; falls back to "
     "host where ranks share a GPU that lacks them) or auto (device when every rank of the "
     "communicator has a GPU of its own, host when ranks share one).",
     MCA_BASE_VAR_TYPE_INT, gpucoll_flags_values, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.device_flags},
    {"host_pipeline",
     "With host flags: enqueue a call's copies and reductions on a stream and publish each step "
     "when the work before it has finished (on), or issue and wait for each in turn (off). "
     "auto: on for cuda; off for emu, whose worker threads compete with the polling ranks for "
     "the CPU (measured slower there).",
     MCA_BASE_VAR_TYPE_INT, gpucoll_auto_off_on_values, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.host_pipeline},
    {"progress_thread",
     "Advance nonblocking and persistent collectives on the accelerated path (MPI_Iallreduce, "
     "MPI_Start, ...) from a thread of gpucoll, one per communicator, while the application "
     "computes between starting and completing them. on: the thread takes a call over as soon "
     "as the application stops polling (overlap). lazy: only after 10-20 ms without "
     "polling (little overlap, little CPU time; it keeps calls that ranks started on two "
     "communicators in different orders from waiting for each other). off: calls advance only "
     "inside MPI calls (such programs can hang), and on communicators that span nodes they are "
     "staged. auto: on where the machine has at least two "
     "cores per process of the job on it, else lazy (an eager thread on an oversubscribed "
     "2-core VM made small calls 1.2-4x slower). The thread never calls MPI.",
     MCA_BASE_VAR_TYPE_INT, gpucoll_progress_thread_values, OPAL_INFO_LVL_5,
     MCA_BASE_VAR_SCOPE_LOCAL, &mca_coll_gpucoll_component.progress_thread},
    {"allreduce_one_shot_max",
     "Largest allreduce (bytes) that auto sends through one-shot; also the size of each of the "
     "two one-shot scratch slots per rank and communicator (device memory). 0: the backend's "
     "default (emu 16 KiB, the crossover measured on a CPU-only VM; cuda 256 KiB, not yet "
     "measured on a GPU). At most 256 MiB (larger values count as 256 MiB).",
     MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.one_shot_max},
    {"allreduce_one_kernel_max",
     "Largest allreduce (bytes) that auto sends through the one-kernel path: one kernel per "
     "rank copies its input into its one-shot slot, publishes a flag with a system-scope "
     "release, waits for its peers' flags on the GPU and reduces all slots; the CPU launches "
     "it and waits once. Taken on communicators of 2-8 ranks on one node whose ranks have a "
     "GPU each or share one whose kernels run side by side (MPS; without it a waiting kernel "
     "holds the GPU until its time slice ends), for element types up to 16 bytes; at most the "
     "one-shot slot (allreduce_one_shot_max). 0 (default, until measured on a GPU): only when "
     "allreduce_algorithm is one_kernel.",
     MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.one_kernel_max},
    {"bcast_chain_min", "Smallest bcast (bytes) that auto sends through the pipelined chain.",
     MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.chain_min},
    {"chunk_size", "Pipeline chunk (bytes) of the two-shot allreduce and the chain bcast.",
     MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.chunk_size},
    {"ipc_cache_size",
     "Most peer allocations kept mapped through IPC per process (least recently used go "
     "first). Mapping is expensive; each cached mapping keeps the peer's memory alive.",
     MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.ipc_cache_size},
    {"ipc_cache_bytes",
     "Most bytes of peers' allocations a process keeps mapped through IPC (least recently "
     "used go first; an allocation larger than this is mapped for its call only). A cached "
     "mapping keeps the peer's memory alive after the peer frees it, so this bounds the memory "
     "freed buffers can hold. 0: the backend's default (emu 1 GiB, cuda 1/8 of the GPU's "
     "memory).",
     MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.ipc_cache_bytes},
    {"inter_algorithm",
     "Algorithm between nodes (among the ranks of one local rank, or the node leaders) of "
     "allreduce on device buffers: auto (direct up to coll_gpucoll_inter_direct_max bytes per "
     "rank, ring above), ring (reduce-scatter + allgather around the nodes, 2(N-1)/N x S sent "
     "per rank: bandwidth), direct (every rank sends its block to every other node: one round, "
     "(N-1) x S: latency).",
     MCA_BASE_VAR_TYPE_INT, gpucoll_inter_algorithm_values, OPAL_INFO_LVL_5,
     MCA_BASE_VAR_SCOPE_ALL_EQ, &mca_coll_gpucoll_component.inter_algorithm},
    {"inter_direct_max",
     "Largest allreduce block (bytes per rank between nodes) that inter_algorithm auto sends "
     "directly to every node.",
     MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.inter_direct_max},
    {"inter_device_memory",
     "How device memory crosses between nodes: auto (straight to UCX when UCX reports CUDA "
     "support and every endpoint's transports read device memory themselves - InfiniBand/RoCE "
     "with GPUDirect RDMA, cuda_ipc - else staged), direct (straight to UCX whenever it reports "
     "CUDA support; UCX 1.22 over tcp was measured to fail), staged (through a persistent "
     "pinned host pool, chunk by chunk, overlapping copies and transfers).",
     MCA_BASE_VAR_TYPE_INT, gpucoll_inter_device_memory_values, OPAL_INFO_LVL_5,
     MCA_BASE_VAR_SCOPE_ALL_EQ, &mca_coll_gpucoll_component.inter_device_memory},
    {"inter_bcast",
     "Bcast between nodes, among the node leaders: auto (a pipelined chain where its rounds "
     "beat the binomial tree's whole transfers - large buffers on three or more nodes: each "
     "link carries S once instead of the root's carrying log2(N) x S - else the tree), tree "
     "(binomial), chain (pipelined, in segments of 4 x coll_gpucoll_inter_chunk_size, on three "
     "or more nodes). Chosen for networks whose links limit the transfer; on nodes faked on one "
     "2-core machine, where every byte is CPU work, the chain measured 0.5-0.95x the tree's "
     "speed (docs/performance.md). Untested on a real network.",
     MCA_BASE_VAR_TYPE_INT, gpucoll_inter_bcast_values, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.inter_bcast},
    {"max_comms",
     "At most this many communicators of a process hold an accelerated path at once (0: no "
     "bound). Each holds two one-shot scratch slots of device memory "
     "(coll_gpucoll_allreduce_one_shot_max each) and some memory mappings (on emu 13 and a file "
     "descriptor per rank at 4 ranks); thousands would exhaust the kernel's vm.max_map_count. A "
     "communicator created while any of its ranks is at the bound stages its device buffers "
     "(said once per process; with coll_gpucoll_verbose 1 per communicator); freeing "
     "communicators makes room for later ones.",
     MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.max_comms},
    {"inter_chunk_size",
     "Pipeline chunk (bytes) between nodes when device memory cannot go to UCX directly (UCX "
     "without CUDA support, e.g. Debian's): the device-to-host copy of a chunk overlaps the "
     "network transfer of the previous ones, through a persistent pinned pool of 4 chunks per "
     "direction and group. With a CUDA-aware UCX, the size of each message. 4096 to 67108864 "
     "(64 MiB); a value outside is replaced by the nearer bound, with a message.",
     MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_6, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.inter_chunk_size},
    {"topology_file",
     "The node's topology as an hwloc XML file (lstopo --of xml FILE writes one), instead of "
     "discovering it with hwloc and NVML. It decides the algorithm family inside a node (GPUs "
     "not all joined by NVLink: ring algorithms for large calls, in an order that crosses each "
     "PCIe switch once) and is printed once per node with coll_gpucoll_verbose 1. With the emu "
     "backend, rank r of a node plays GPU r of the file (or GPU $GPUCOLL_EMU_GPU), to study a "
     "machine one does not have. gpucoll_topo --xml FILE shows what gpucoll makes of it.",
     MCA_BASE_VAR_TYPE_STRING, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.topology_file},
    {"nvlink_file",
     "The NVLinks of the machine given by coll_gpucoll_topology_file (NVML describes the "
     "machine gpucoll runs on, not the file's): lines 'nvlink BUSID PEER N', PEER another GPU's "
     "PCI bus id or 'nvswitch', '#' comments (a file without any statement is an error, "
     "reported like an unreadable one). Without it, the NVLinks the XML file records are used: "
     "hwloc's NVLinkBandwidth distances, which lstopo writes where hwloc has NVML (a DGX's "
     "GPUs and NVSwitches, an IBM POWER node's GPU pairs); a file without them has none.",
     MCA_BASE_VAR_TYPE_STRING, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.nvlink_file},
    {"rails",
     "Between nodes, give each process's UCX context only the RDMA NIC (InfiniBand/RoCE) "
     "nearest its GPU (set UCX_NET_DEVICES from the topology to its first active port), so "
     "that the local ranks drive one NIC each (rails). Applied where the job has several "
     "processes on a machine, the topology is discovered (not a file), the machine has an RDMA "
     "device with an active port and UCX_NET_DEVICES is not set; plain Ethernet ports are never "
     "pinned (nothing says which one is up or meant for the job). false: UCX chooses.",
     MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.rails},
    {"timing",
     "Where the time of accelerated calls goes: each process adds every call's steps "
     "(classification, pointer queries, descriptors, post, agreement, the algorithm with its "
     "IPC lookups, peer waits and device work, the end) to a table and prints it at MPI_Finalize, "
     "a block per collective with each step's mean in microseconds. Costs two clock reads per "
     "step while on; off (default): one load per step.",
     MCA_BASE_VAR_TYPE_BOOL, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.timing},
    {"rail_devices",
     "The NIC of each GPU for the rails, as UCX_NET_DEVICES takes it: a comma-separated list, "
     "entry i for GPU i of the process's visible GPUs (modulo the list's length), e.g. "
     "'mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1', or entries 'BUSID=NIC' naming each GPU by its PCI "
     "bus id (e.g. '0000:18:00.0=mlx5_0:1,...'; right also when CUDA_VISIBLE_DEVICES differs "
     "per rank; a GPU not listed: UCX chooses); '+' joins two NICs of one GPU. For machines "
     "whose PCI tree hwloc cannot see (containers without /sys), or to override what the "
     "topology says; wins over the discovered NIC, over the one-process rule and over "
     "UCX_NET_DEVICES. Ignored with coll_gpucoll_rails false. Empty (default): from the "
     "topology.",
     MCA_BASE_VAR_TYPE_STRING, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.rail_devices},
    {"cost_model",
     "Pick the algorithm of each call on one node with the cost model (docs/cost-model.md) "
     "instead of size thresholds: a preset (h100-nvswitch, pcie4-workstation, emu) or a params "
     "file written by contrib/calibrate.py on this machine (keys a file leaves out come from the "
     "backend's preset: emu on emu, h100-nvswitch on cuda). The model's table is computed once "
     "per communicator (coll_gpucoll_verbose 1 prints it); coll_gpucoll_<coll>_algorithm still "
     "wins. Empty (default): size thresholds and the topology's family. "
     "gpucoll_topo --model SPEC --backend emu|cuda prints what a model predicts and this table.",
     MCA_BASE_VAR_TYPE_STRING, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.cost_model},
    {"selection_file",
     "The measured selection table auto follows on one node: per collective, rank count, GPU "
     "sharing mode (gpu-per-rank, shared-mps, shared-no-mps) and size range, the algorithm (or "
     "staged) a measurement on the machine found fastest. contrib/selection-table.py writes one "
     "from contrib/gpu-run.sh calibrate's tables (docs/tuning.md). auto (default): the "
     "backend's built-in table where it has one for the communicator (cuda: 2 and 4 ranks "
     "sharing one GPU, with and without MPS, from the 2026-11-27 H100 measurements; emu: none), "
     "unless coll_gpucoll_cost_model is set; none: no table; else a file. "
     "coll_gpucoll_<coll>_algorithm still wins; sizes the table leaves out fall back to the "
     "cost model and the size thresholds. Every rank of a node must read the same rules, or "
     "none uses them (said once). coll_gpucoll_verbose 1 prints the rules a communicator "
     "follows.",
     MCA_BASE_VAR_TYPE_STRING, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_ALL_EQ,
     &mca_coll_gpucoll_component.selection_file},
    {"wait_warning",
     "Seconds a rank may wait inside one step of a blocking accelerated call for other ranks "
     "(their arrival in the call, a step of it, the verdict of another node) before it prints, "
     "once for that wait, whom it waits for. A rank that never makes the call (a missing or "
     "mismatched collective; between nodes with coll_gpucoll_uniform_memory, a rank that "
     "passes host memory) cannot be told from a late one: the call would hang silently. Only a "
     "message: the wait goes on. 0: never.",
     MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.wait_warning},
    {"peer_timeout",
     "Seconds a rank waits inside a blocking accelerated call for a rank on another node (its "
     "data, or its node's word that it entered the call) with nothing arriving, before the call "
     "fails there: that node is unreachable (its link or the node is down), or the rank is "
     "stopped or that late (a late rank cannot be told from a lost one). Every rank that waits "
     "on it then fails the call too (MPI_ERRORS_RETURN: an error code; the default error "
     "handler ends the job), with a message naming the rank and its host. A connection UCX "
     "itself reports as failed fails the call at once. Raise it (or 0) where ranks enter "
     "collectives minutes apart. Nonblocking calls: their data only. 0: wait for ever.",
     MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_LOCAL,
     &mca_coll_gpucoll_component.peer_timeout},
};

static const mca_base_var_enum_value_t gpucoll_version_check_values[] = {
    {MCA_COLL_GPUCOLL_VERSION_CHECK_OFF, "off"},
    {MCA_COLL_GPUCOLL_VERSION_CHECK_SERIES, "series"},
    {MCA_COLL_GPUCOLL_VERSION_CHECK_EXACT, "exact"},
    {0, NULL},
};

static int gpucoll_register(void) {
    const mca_base_component_t* c = &mca_coll_gpucoll_component.super.collm_version;
    /* First the guard (coll_gpucoll_version.c): nothing else runs in an Open
     * MPI this build was not made for. */
    mca_base_var_enum_t* checks = NULL;
    int rc = mca_base_var_enum_create("coll_gpucoll_version_check", gpucoll_version_check_values,
                                      &checks);
    if (OPAL_SUCCESS != rc) return rc;
    rc = mca_base_component_var_register(
        c, "version_check",
        "Whether the component loads only into the Open MPI release it was built against "
        "(exact: the same release, e.g. 5.0.7; series: any release of its series, e.g. 5.0.x; "
        "off: any). Layouts the component reads change inside a series (5.0.7, 5.0.10): "
        "rebuild instead of relaxing this where you can",
        MCA_BASE_VAR_TYPE_INT, checks, 0, 0, OPAL_INFO_LVL_5, MCA_BASE_VAR_SCOPE_READONLY,
        &mca_coll_gpucoll_component.version_check);
    OBJ_RELEASE(checks);
    if (rc < 0) return rc;
    rc = mca_coll_gpucoll_version_guard(mca_coll_gpucoll_component.version_check);
    if (OMPI_SUCCESS != rc) return rc;
    for (size_t i = 0; i < sizeof gpucoll_params / sizeof gpucoll_params[0]; ++i) {
        const gpucoll_param_t* p = &gpucoll_params[i];
        mca_base_var_enum_t* values = NULL;
        if (NULL != p->values) {
            char enum_name[64];
            snprintf(enum_name, sizeof enum_name, "coll_gpucoll_%s", p->name);
            int rc = mca_base_var_enum_create(enum_name, p->values, &values);
            if (OPAL_SUCCESS != rc) return rc;
        }
        int idx = mca_base_component_var_register(c, p->name, p->help, p->type, values, 0, 0,
                                                  p->level, p->scope, p->storage);
        if (NULL != values) OBJ_RELEASE(values);
        if (idx < 0) return idx;
    }
    return OMPI_SUCCESS;
}

static int gpucoll_open(void) {
    mca_coll_gpucoll_component.output = opal_output_open(NULL);
    opal_output_set_verbosity(mca_coll_gpucoll_component.output,
                              mca_coll_gpucoll_component.verbose);
    return OMPI_SUCCESS;
}

/* coll_gpucoll_timing: this process's table, a line at a time (one
 * opal_output each, so that lines of several processes do not interleave
 * within a line). */
static void gpucoll_print_timing(void) {
    const size_t len = gpucoll_timing_report(NULL, 0) + 1;
    char* text = malloc(len);
    if (NULL == text) return;
    gpucoll_timing_report(text, len);
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); NULL != line;
         line = strtok_r(NULL, "\n", &save)) {
        opal_output(0, "coll:gpucoll timing %s: %s", OPAL_NAME_PRINT(OPAL_PROC_MY_NAME), line);
    }
    free(text);
}

static int gpucoll_close(void) {
    if (mca_coll_gpucoll_component.backend_ready) {
        if (mca_coll_gpucoll_component.timing) gpucoll_print_timing();
        gpucoll_staging_release();
        mca_coll_gpucoll_nonblocking_fini();
        mca_coll_gpucoll_staging_pool_release();
        mca_coll_gpucoll_staging_unreserve();
        gpucoll_finalize(); /* the inter-node transport, before Open MPI's network goes */
    }
    mca_coll_gpucoll_component.backend_ready = false;
    if (mca_coll_gpucoll_component.output >= 0) {
        opal_output_close(mca_coll_gpucoll_component.output);
        mca_coll_gpucoll_component.output = -1;
    }
    return OMPI_SUCCESS;
}

/* ---------------------------------------------------------------------------
 * Selection
 * ------------------------------------------------------------------------- */

/* Once per process, in MPI_Init: choose the device backend. Failing here
 * takes the component out of every communicator at once. */
int mca_coll_gpucoll_init_query(bool enable_progress_threads, bool enable_mpi_threads) {
    (void)enable_progress_threads;
    mca_coll_gpucoll_component_t* c = &mca_coll_gpucoll_component;
    c->thread_multiple = enable_mpi_threads;
    const char* param = gpucoll_device_values[c->device].string;

    /* "auto" lets libgpucoll resolve the environment the same way the
     * application does (GPUCOLL_DEVICE, then OMPI_MCA_coll_gpucoll_device);
     * an explicit name must be honoured or fail loudly. */
    const char* request = MCA_COLL_GPUCOLL_DEVICE_AUTO == c->device ? NULL : param;
    /* auto (-1) -> 1, off (0) -> 0, on (1) -> 2 (install UCX's hooks) */
    gpucoll_set_host_cache(c->host_cache < 0 ? 1 : c->host_cache == 0 ? 0 : 2);
    int rc = gpucoll_init_backend(request);
    if (GPUCOLL_SUCCESS != rc) {
        GPUCOLL_ERROR(
            "device backend '%s' is unusable, the component disables itself: %s "
            "(gpucoll status %d). MPI collectives on device buffers will crash Open "
            "MPI; make coll_gpucoll_device and GPUCOLL_DEVICE agree, or run with "
            "--mca coll ^gpucoll if no device buffers are used.",
            param, gpucoll_last_error(), rc);
        return OMPI_ERR_NOT_AVAILABLE;
    }
    const char* backend = gpucoll_backend();
    if (0 == strcmp(backend, "none")) {
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_SELECT,
                        "no device backend (device=%s found no GPU): component not used", param);
        return OMPI_ERR_NOT_AVAILABLE;
    }
    for (int i = 0; i < GPUCOLL_COLL_COUNT; ++i) {
        gpucoll_algorithm_t a = (gpucoll_algorithm_t)c->algorithm[i];
        if (!gpucoll_algorithm_valid((gpucoll_coll_t)i, a)) {
            GPUCOLL_ERROR("coll_gpucoll_%s_algorithm=%s does not serve %s; using auto",
                          gpucoll_coll_name((gpucoll_coll_t)i), gpucoll_algorithm_name(a),
                          gpucoll_coll_name((gpucoll_coll_t)i));
            c->algorithm[i] = GPUCOLL_ALGO_AUTO;
        }
    }
    /* The same bound the core applies (each group keeps 4 chunks per
     * direction pinned, and a bcast segment is 4 chunks): said once here. */
    if (c->inter_chunk_size < GPUCOLL_INTER_CHUNK_MIN_BYTES ||
        c->inter_chunk_size > GPUCOLL_INTER_CHUNK_MAX_BYTES) {
        const size_t bounded = c->inter_chunk_size < GPUCOLL_INTER_CHUNK_MIN_BYTES
                                   ? GPUCOLL_INTER_CHUNK_MIN_BYTES
                                   : GPUCOLL_INTER_CHUNK_MAX_BYTES;
        GPUCOLL_ERROR("coll_gpucoll_inter_chunk_size=%zu is outside %zu..%zu bytes; using %zu",
                      c->inter_chunk_size, (size_t)GPUCOLL_INTER_CHUNK_MIN_BYTES,
                      (size_t)GPUCOLL_INTER_CHUNK_MAX_BYTES, bounded);
        c->inter_chunk_size = bounded;
    }
    mca_coll_gpucoll_staging_test_hook();
    mca_coll_gpucoll_staging_reserve();
    c->backend_ready = true;
    gpucoll_timing_enable(c->timing);
    GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_SELECT,
                    "libgpucoll %s, device backend '%s' (parameter device=%s), priority %d",
                    gpucoll_version(), backend, param, c->priority);
    return OMPI_SUCCESS;
}

/* The info key "gpucoll_enable" of a communicator made by
 * MPI_Comm_dup_with_info (Open MPI 4.1 may select a communicator's modules
 * before other calls attach their info: MPI_Comm_dup, and MPI_Comm_split_type
 * when it reorders ranks): "false", "0", "no" or "off" keep gpucoll off it, so
 * its collectives go to Open MPI's modules with nothing of gpucoll in
 * between (device buffers included: as without the component). Any other
 * value, or none, leaves the choice to the MCA parameters. Like an MCA
 * parameter, it must be the same on every rank of the communicator. */
static bool gpucoll_info_disabled(struct ompi_communicator_t* comm) {
    char value[16];
    int flag = 0;
    if (NULL == comm->super.s_info ||
        OPAL_SUCCESS != mca_coll_gpucoll_info_get(comm->super.s_info, "gpucoll_enable", value,
                                                  sizeof value, &flag) ||
        !flag) {
        return false;
    }
    static const char* const off[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; ++i)
        if (0 == strcasecmp(value, off[i])) return true;
    return false;
}

/* A communicator an Open MPI component made for its own algorithms: coll/han
 * (the default for communicators across nodes in 5.0 and 6.0) splits each
 * communicator it serves into node and leader sub-communicators and names
 * the modules it wants there with the info key ompi_comm_coll_preference
 * ("tuned,^han", "sm,^han", ...). Those get only what han (our delegate)
 * passes them: host buffers, from inside a call gpucoll already counted.
 * Serving them too counted each such call again (a host MPI_Bcast across
 * namespace hosts under 5.0: two bcast calls) and put a core on
 * communicators no application sees. */
static bool gpucoll_internal_subcomm(struct ompi_communicator_t* comm) {
    char value[64];
    int flag = 0;
    return NULL != comm->super.s_info &&
           OPAL_SUCCESS == mca_coll_gpucoll_info_get(comm->super.s_info,
                                                     "ompi_comm_coll_preference", value,
                                                     sizeof value, &flag) &&
           flag;
}

/* Per communicator. The decision depends only on MCA parameters, the
 * backend, the kind of communicator and its gpucoll_enable and
 * ompi_comm_coll_preference info keys, so it is the same on every rank. */
mca_coll_base_module_t* mca_coll_gpucoll_comm_query(struct ompi_communicator_t* comm,
                                                    int* priority) {
    mca_coll_gpucoll_component_t* c = &mca_coll_gpucoll_component;
    if (!c->backend_ready || c->priority < 0) {
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_SELECT, "comm %s (cid %u): not used (%s)",
                        comm->c_name, mca_coll_gpucoll_comm_cid(comm),
                        c->backend_ready ? "negative priority" : "no device backend");
        return NULL;
    }
    if (gpucoll_info_disabled(comm)) {
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_SELECT,
                        "comm %s (cid %u): not used (info key gpucoll_enable is false)",
                        comm->c_name, mca_coll_gpucoll_comm_cid(comm));
        return NULL;
    }
    if (gpucoll_internal_subcomm(comm)) {
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_SELECT,
                        "comm %s (cid %u): not used (a sub-communicator of an Open MPI "
                        "component, info key ompi_comm_coll_preference: its calls are that "
                        "component's, on host buffers)",
                        comm->c_name, mca_coll_gpucoll_comm_cid(comm));
        return NULL;
    }
    /* Intercommunicators get a module too, without the accelerated path:
     * device buffers are staged (allreduce, bcast, allgather, reduce) or
     * refused with an error (reduce_scatter), never handed to coll/inter. */
    mca_coll_gpucoll_module_t* m = mca_coll_gpucoll_module_new(comm);
    if (NULL == m) return NULL;
    *priority = c->priority;
    GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_SELECT,
                    "comm %s (cid %u, size %d): available, priority %d, backend %s", comm->c_name,
                    mca_coll_gpucoll_comm_cid(comm), ompi_comm_size(comm), c->priority,
                    gpucoll_backend());
    return &m->super;
}

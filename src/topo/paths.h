// paths.h - how the devices of a Machine are connected, in the terms of
// `nvidia-smi topo -m`, and the decisions that follow: the NIC each GPU uses,
// whether GPUDirect RDMA pays for that pair, whether a set of GPUs is a full
// NVLink mesh, and the ring order that crosses the slow links fewest times.
#pragma once

#include <string>
#include <vector>

#include "topo/topology.h"

namespace gpucoll::topo {

// Closest first. NV: NVLink (straight or through NVSwitches); PIX: one PCIe
// switch; PXB: several PCIe bridges, no host bridge; PHB: through a host
// bridge (the CPU's root complex); NODE: between host bridges of one NUMA
// node; SYS: across the CPUs' interconnect.
enum class Path { SELF, NV, PIX, PXB, PHB, NODE, SYS };

struct Connection {
    Path path = Path::SYS;
    int nvlinks = 0;  // NV only
};

// "X", "NV18", "PIX", ...
std::string to_string(const Connection& c);
const char* path_name(Path p);

// How two PCI devices are connected through the PCI tree (never NV).
Path pci_path(const PciDevice& a, const PciDevice& b, const Machine& m);

// How GPUs a and b (indices into m.gpus) are connected: NVLink where they
// have one, else the PCI path.
Connection gpu_to_gpu(const Machine& m, int a, int b);

// The NIC a GPU drives between nodes. Where the machine has RDMA devices
// (InfiniBand/RoCE, OpenFabrics) with a port hwloc reports active: the
// closest of those, and among equally close ones the one fewest GPUs use so
// far (lowest index on a tie), so that GPUs spread over them: rails.
// Otherwise the closest other network device (lowest index on a tie), for
// the report only: no rail, since nothing says a plain Ethernet port is up
// or meant for the job (a management port, a dead eno2), and UCX chooses.
struct NicChoice {
    int nic = -1;  // index into m.nics; -1: none
    Path path = Path::SYS;
    bool rail = false;       // an RDMA device with an active port: the GPU's rail
    bool gpudirect = false;  // a rail at PXB or closer (NCCL's rule)
};
std::vector<NicChoice> nic_per_gpu(const Machine& m);

// The NIC's name as UCX_NET_DEVICES takes it: "mlx5_0:1" (port 1) for an
// RDMA device, the interface ("eth0") otherwise.
std::string ucx_device_name(const Nic& nic);

// UCX_NET_DEVICES for the process of GPU gpu (an index into m.gpus) on
// rails: its rail's ucx_device_name; empty, with *why saying so, where it
// has no rail (UCX chooses).
std::string rail_device(const Machine& m, int gpu, std::string* why);

// Every pair of the given GPUs joined by NVLink.
bool full_nvlink_mesh(const Machine& m, const std::vector<int>& gpus);

// The order in which ranks form a ring, given each rank's GPU: the cycle
// whose slowest hop is the fastest, then with the fewest slow hops (each
// PCIe switch crossed once), starting at rank 0. Exhaustive up to 10 ranks,
// PCI-tree order beyond. A rank whose GPU is unknown (-1) keeps rank order.
std::vector<int> ring_order(const Machine& m, const std::vector<int>& gpu_of_rank);

// The intra-node algorithm family the links call for.
enum class Family { DIRECT, RING };
struct Layout {
    Family family = Family::DIRECT;
    std::vector<int> ring;  // ring_order of the ranks
    std::string why;
};
Layout choose_layout(const Machine& m, const std::vector<int>& gpu_of_rank);

}  // namespace gpucoll::topo

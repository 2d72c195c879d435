// node_layout.h - what a node communicator takes from the topology: which
// GPU each rank drives, whether the links call for ring algorithms, and the
// ring order. Every rank computes it from the same inputs (every rank's GPU,
// exchanged, and the node's machine, whose fingerprint is exchanged too), so
// every rank reaches the same layout without another exchange.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpucoll.h"
#include "topo/paths.h"
#include "topo/topology.h"

namespace gpucoll::intra {

// This process's view of the node, discovered once per process for each
// pair of files (empty: this machine). Never fails: *error says what went
// wrong (an unreadable file) and the result is null.
const topo::Machine* node_machine(const std::string& xml_file, const std::string& nvlink_file,
                                  std::string* error);

// Equal on every process that sees the same machine.
uint64_t machine_fingerprint(const topo::Machine& m);

// What a rank contributes before the exchange.
struct LayoutVote {
    int32_t gpu = -1;          // index into the machine's GPUs; -1 unknown
    uint64_t fingerprint = 0;  // of the machine it saw; 0: none
    uint64_t model = 0;        // fingerprint of the cost model it loaded; 0: none
    uint64_t selection = 0;    // fingerprint of the measured selection table; 0: none
};

// This rank's vote: its GPU by PCI bus id, or (no bus id: emu) by
// $GPUCOLL_EMU_GPU or its rank on the node, where a topology file was given.
// *machine: the machine the vote refers to (null when none).
LayoutVote vote_layout(const gpucoll_comm_config_t& config, int node_rank, int node_size,
                       const std::string& bus_id, const topo::Machine** machine,
                       std::string* error);

// The layout from every rank's vote (the same on every rank): rank order and
// the direct family unless every rank saw the same machine and knows its GPU.
topo::Layout agree_layout(const topo::Machine* machine, const std::vector<LayoutVote>& votes);

// The network device this process's transport should use between nodes:
// the RDMA device with an active port nearest its GPU (rails: each local
// rank on its own NIC; topo::rail_device), as UCX_NET_DEVICES takes it.
// Empty (UCX chooses) where the user set UCX_NET_DEVICES, the topology
// comes from a file, the GPU has no PCI bus id (emu) or the machine has no
// such RDMA device (plain Ethernet ports are never pinned); *why says which.
// config.rail_devices, where given, names it for GPU ordinal instead.
std::string rail_net_device(const gpucoll_comm_config_t& config, int ordinal,
                            const std::string& gpu_bus_id, std::string* why);

// The NIC of a GPU in a comma-separated list (spaces trimmed, '+' joining
// several NICs of one GPU: "a+b" -> "a,b"): entry ordinal (modulo their
// number), or, in a list of "BUSID=NIC" entries, the one of bus_id ("" if
// none).
std::string rail_device_of(const std::string& list, int ordinal, const std::string& bus_id = {});

}  // namespace gpucoll::intra

// topology.h - what a node is made of, as far as collectives care: its GPUs
// and network devices with their places in the PCI tree, NUMA and CPU
// affinity, and the NVLinks between GPUs. Discovery (hwloc, NVML, or files
// that describe a machine we do not have) fills a Machine; paths.cc answers
// the questions the rest of gpucoll asks of it (how two devices are
// connected, which NIC a GPU should use, the ring order of a set of GPUs).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpucoll::topo {

// One PCI device's place in the machine.
struct PciDevice {
    std::string bus_id;  // "0000:18:00.0", lower case, as hwloc and NVML print it
    unsigned vendor = 0, device = 0, pci_class = 0;
    // The bridges from the device upward, nearest first, ending with its host
    // bridge: indices into Machine::bridges.
    std::vector<int> bridges;
    int numa = -1;       // OS index of the nearest NUMA node; -1 unknown
    int package = -1;    // OS index of the package (socket); -1 unknown
    std::string cpuset;  // CPUs close to the device, as a list ("0-7,16-23")
};

struct Bridge {
    bool host = false;   // a host bridge (the root complex), else PCI-to-PCI
    std::string bus_id;  // PCI-to-PCI bridges only
    int order = 0;       // depth-first position in the PCI tree
};

struct Gpu : PciDevice {
    std::string name;  // the OS device hwloc reports (cuda0, nvml0, opencl0d0), may be empty
};

struct Nic : PciDevice {
    std::string name;    // the RDMA device (mlx5_0), else the network interface (eth0)
    std::string netdev;  // the network interface, where there is one
    bool rdma = false;   // an OpenFabrics (InfiniBand/RoCE) device: GPUDirect RDMA possible
    int port = 1;        // RDMA: the first active port (hwloc's Port<n>State 4)
    bool usable = true;  // RDMA: hwloc reports an active port (no port state: false)
};

// NVLinks of one GPU: links into NVSwitches, and links straight to other
// GPUs (by index into Machine::gpus).
struct GpuLinks {
    int to_switch = 0;
    std::map<int, int> to_gpu;
};

struct Machine {
    std::string source;              // where the description came from
    std::string links_source;        // where the NVLink description came from
    std::vector<std::string> notes;  // what could not be found, and why
    int packages = 0, numa_nodes = 0, cores = 0, pus = 0;
    std::vector<Bridge> bridges;
    std::vector<Gpu> gpus;  // in PCI bus id order (CUDA_DEVICE_ORDER=PCI_BUS_ID)
    std::vector<Nic> nics;
    std::vector<GpuLinks> links;  // per GPU, same order as gpus

    int gpu_by_bus_id(const std::string& bus_id) const;  // -1 when absent
};

// Where to find the description. Empty: this machine (hwloc, then NVML).
struct Sources {
    std::string xml_file;    // an hwloc XML file (also HWLOC_XMLFILE)
    std::string links_file;  // an NVLink description (*.nvlinks), used where NVML is absent
};

// Discovers a machine. Fails only when an explicit file cannot be read or
// parsed; a machine without GPUs, NICs, NVML or hwloc is a Machine that says
// so in notes.
Status discover(const Sources& sources, Machine* out);

// Reads an NVLink description (see test/topo/README.md) into m.links.
Status load_links_file(const std::string& path, Machine* m);

// Asks NVML (loaded at run time) for the NVLinks of m's GPUs. Returns false
// with *why set when NVML is absent or answers nothing.
bool query_nvml_links(Machine* m, std::string* why);

// "0000:18:00.0" from any of the forms NVML and CUDA print ("00000000:18:00.0",
// upper case); empty when s is not a PCI bus id.
std::string normalize_bus_id(const std::string& s);

}  // namespace gpucoll::topo

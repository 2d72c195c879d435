// gpucoll_topo - how this node's GPUs and NICs are connected, and what
// gpucoll makes of it. See `gpucoll_topo --help`.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "topo/report.h"
#include "topo/topology.h"

namespace {

const char kHelp[] =
    "NAME\n"
    "    gpucoll_topo - how a node's GPUs and network devices are connected, and the\n"
    "    choices gpucoll makes from it\n"
    "\n"
    "SYNOPSIS\n"
    "    gpucoll_topo [--xml FILE [--nvlinks FILE]] [--ranks N | --gpus LIST] [--json]\n"
    "\n"
    "DESCRIPTION\n"
    "    Discovers this machine with hwloc (PCI tree, packages, NUMA nodes, CPU sets,\n"
    "    NVIDIA GPUs, network devices) and NVML (NVLinks, loaded at run time from the\n"
    "    driver), or reads a machine described in files, and prints:\n"
    "      - the GPU x GPU and GPU x NIC matrix in the terms of `nvidia-smi topo -m`,\n"
    "        with each GPU's CPU and NUMA affinity;\n"
    "      - the NIC each GPU drives between nodes (the closest; GPUs spread over\n"
    "        equally close NICs), and whether GPUDirect RDMA pays for that pair\n"
    "        (an RDMA device behind the same PCIe switch: PXB or closer);\n"
    "      - for the node's ranks, the ring order (the cycle whose slowest hop is the\n"
    "        fastest, crossing each PCIe switch once) and the algorithm family:\n"
    "        direct (one-shot/two-shot, all peers at once) on a full NVLink mesh,\n"
    "        ring on PCIe or a partial mesh.\n"
    "    Without GPUs it says so and prints CPUs, NUMA nodes and NICs.\n"
    "\n"
    "OPTIONS\n"
    "    --xml FILE      Read the machine from an hwloc XML file (lstopo --of xml FILE\n"
    "                    writes one) instead of discovering this one. HWLOC_XMLFILE\n"
    "                    does the same.\n"
    "    --nvlinks FILE  The NVLinks of the machine read with --xml, where NVML cannot\n"
    "                    be asked: lines 'nvlink BUSID PEER N' (PEER: another GPU's PCI\n"
    "                    bus id, or 'nvswitch'); '#' starts a comment.\n"
    "    --ranks N       N ranks on the node, rank r on GPU r modulo the GPU count\n"
    "                    (default: one rank per GPU).\n"
    "    --gpus LIST     The GPU of each rank, comma-separated (e.g. 0,2,1,3).\n"
    "    --json          Print JSON instead of text.\n"
    "    -h, --help      This text.\n"
    "\n"
    "LEGEND\n"
    "    X self; NV# # NVLinks; PIX one PCIe switch; PXB several PCIe bridges, no host\n"
    "    bridge; PHB through a PCIe host bridge; NODE between host bridges of one NUMA\n"
    "    node; SYS across the CPUs' interconnect.\n"
    "\n"
    "ENVIRONMENT\n"
    "    HWLOC_XMLFILE   As --xml.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 on success; 1 when a file cannot be read; 2 on a usage error.\n"
    "\n"
    "EXAMPLES\n"
    "    gpucoll_topo\n"
    "    gpucoll_topo --xml dgx_h100.xml --nvlinks dgx_h100.nvlinks\n"
    "    gpucoll_topo --xml pcie_4gpu.xml --gpus 0,2,1,3 --json\n"
    "\n"
    "SEE ALSO\n"
    "    nvidia-smi topo -m, lstopo(1); the component's MCA parameters\n"
    "    coll_gpucoll_topology_file and coll_gpucoll_nvlink_file (ompi_info --param coll\n"
    "    gpucoll --level 9).\n";

int usage(const char* msg) {
    std::fprintf(stderr, "gpucoll_topo: %s (try --help)\n", msg);
    return 2;
}

bool parse_list(const char* s, std::vector<int>* out) {
    out->clear();
    while (*s != '\0') {
        char* end = nullptr;
        const long v = std::strtol(s, &end, 10);
        if (end == s || v < -1 || v > 4096) return false;
        out->push_back(static_cast<int>(v));
        s = end;
        if (*s == ',')
            ++s;
        else if (*s != '\0')
            return false;
    }
    return !out->empty();
}

}  // namespace

int main(int argc, char** argv) {
    gpucoll::topo::Sources sources;
    bool json = false;
    long ranks = 0;
    std::vector<int> gpus;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        auto value = [&](const char* opt) -> const char* {
            if (i + 1 >= argc) return nullptr;
            (void)opt;
            return argv[++i];
        };
        if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
            std::fputs(kHelp, stdout);
            return 0;
        } else if (!std::strcmp(a, "--json")) {
            json = true;
        } else if (!std::strcmp(a, "--xml")) {
            const char* v = value(a);
            if (v == nullptr) return usage("--xml needs a file");
            sources.xml_file = v;
        } else if (!std::strcmp(a, "--nvlinks")) {
            const char* v = value(a);
            if (v == nullptr) return usage("--nvlinks needs a file");
            sources.links_file = v;
        } else if (!std::strcmp(a, "--ranks")) {
            const char* v = value(a);
            char* end = nullptr;
            ranks = v == nullptr ? 0 : std::strtol(v, &end, 10);
            if (v == nullptr || *end != '\0' || ranks < 1 || ranks > 4096)
                return usage("--ranks needs a count of 1..4096");
        } else if (!std::strcmp(a, "--gpus")) {
            const char* v = value(a);
            if (v == nullptr || !parse_list(v, &gpus))
                return usage("--gpus needs a comma-separated list of GPU indices");
        } else {
            return usage((std::string("unknown option ") + a).c_str());
        }
    }
    if (!sources.links_file.empty() && sources.xml_file.empty() &&
        std::getenv("HWLOC_XMLFILE") == nullptr)
        return usage(
            "--nvlinks describes the machine of --xml; this machine's NVLinks come "
            "from NVML");
    gpucoll::topo::Machine m;
    if (gpucoll::topo::discover(sources, &m) != gpucoll::kSuccess) {
        std::fprintf(stderr, "gpucoll_topo: %s\n", gpucoll::last_error());
        return 1;
    }
    gpucoll::topo::ReportInput in;
    in.machine = &m;
    const int ng = static_cast<int>(m.gpus.size());
    if (!gpus.empty()) {
        for (int g : gpus)
            if (g >= ng) return usage("--gpus names a GPU the machine does not have");
        in.gpu_of_rank = gpus;
    } else if (ranks > 0 && ng > 0) {
        for (long r = 0; r < ranks; ++r) in.gpu_of_rank.push_back(static_cast<int>(r % ng));
    }
    const std::string out = json ? format_json(in) : format_text(in);
    std::fputs(out.c_str(), stdout);
    return 0;
}

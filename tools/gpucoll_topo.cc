// gpucoll_topo - how this node's GPUs and NICs are connected, and what
// gpucoll makes of it. See `gpucoll_topo --help`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "intra/one_shot_slot.h"
#include "topo/cost_model.h"
#include "topo/model_table.h"
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
    "    gpucoll_topo --model PRESET|FILE [--backend emu|cuda] [--one-shot-max BYTES]\n"
    "                 [--nodes N] [--ranks-per-node M] [--coll C] [--sizes MIN:MAX]\n"
    "                 [--params]\n"
    "\n"
    "DESCRIPTION\n"
    "    Discovers this machine with hwloc (PCI tree, packages, NUMA nodes, CPU sets,\n"
    "    NVIDIA GPUs, network devices) and NVML (NVLinks, loaded at run time from the\n"
    "    driver), or reads a machine described in files, and prints:\n"
    "      - the GPU x GPU and GPU x NIC matrix in the terms of `nvidia-smi topo -m`,\n"
    "        with each GPU's CPU and NUMA affinity;\n"
    "      - the NIC each GPU drives between nodes: its rail, the closest RDMA device\n"
    "        with an active port (GPUs spread over equally close ones; the process's\n"
    "        UCX_NET_DEVICES), or without one the closest network device, left to\n"
    "        UCX; and whether GPUDirect RDMA pays for the rail (behind the same PCIe\n"
    "        switch: PXB or closer);\n"
    "      - for the node's ranks, the ring order (the cycle whose slowest hop is the\n"
    "        fastest, crossing each PCIe switch once) and the algorithm family:\n"
    "        direct (one-shot/two-shot, all peers at once) on a full NVLink mesh,\n"
    "        ring on PCIe or a partial mesh.\n"
    "    Without GPUs it says so and prints CPUs, NUMA nodes and NICs.\n"
    "\n"
    "OPTIONS\n"
    "    --xml FILE      Read the machine from an hwloc XML file (lstopo --of xml FILE\n"
    "                    writes one) instead of discovering this one.\n"
    "    --nvlinks FILE  The NVLinks of the machine read with --xml, where NVML cannot\n"
    "                    be asked: lines 'nvlink BUSID PEER N' (PEER: another GPU's PCI\n"
    "                    bus id, or 'nvswitch'); '#' starts a comment.\n"
    "    --ranks N       N ranks on the node, rank r on GPU r modulo the GPU count\n"
    "                    (default: one rank per GPU).\n"
    "    --gpus LIST     The GPU of each rank, comma-separated (e.g. 0,2,1,3).\n"
    "    --json          Print JSON instead of text.\n"
    "\n"
    "  The cost model (docs/cost-model.md): predicted time and bus bandwidth of every\n"
    "  algorithm for a described cluster, no machine needed:\n"
    "    --model PRESET|FILE  Link costs: a preset (h100-nvswitch: 8 x H100 SXM per\n"
    "                    node on NVSwitch, one 400 Gb/s NIC per GPU; pcie4-workstation;\n"
    "                    emu) or a params file ('key = value' lines; --params prints\n"
    "                    one to start from), read as coll_gpucoll_cost_model reads it:\n"
    "                    the keys a file leaves out come from the backend's preset.\n"
    "    --backend B     The device backend the component would run on: emu (a file\n"
    "                    refines the emu preset) or cuda (h100-nvswitch). Default: emu\n"
    "                    for --model emu, else cuda.\n"
    "    --one-shot-max BYTES  coll_gpucoll_allreduce_one_shot_max: one-shot's limit and\n"
    "                    scratch slot in the selection table (default 0: the backend's,\n"
    "                    emu 16K, cuda 256K; suffixes K M G).\n"
    "    --nodes N       Nodes (default 1).\n"
    "    --ranks-per-node M  Ranks (GPUs) per node (default 8).\n"
    "    --coll C        allreduce (default), bcast, allgather, reduce_scatter,\n"
    "                    reduce_scatter_block, reduce, or all.\n"
    "    --sizes MIN:MAX Bytes, doubling, suffixes K M G (default 8:1G).\n"
    "    --params        Print the parameters as a params file and exit.\n"
    "    -h, --help      This text.\n"
    "\n"
    "LEGEND\n"
    "    X self; NV# # NVLinks; PIX one PCIe switch; PXB several PCIe bridges, no host\n"
    "    bridge; PHB through a PCIe host bridge; NODE between host bridges of one NUMA\n"
    "    node; SYS across the CPUs' interconnect.\n"
    "\n"
    "ENVIRONMENT\n"
    "    HWLOC_XMLFILE   hwloc reads the machine from this file (meant for this\n"
    "                    machine, saved to spare discovery: NVML is still asked).\n"
    "\n"
    "EXIT STATUS\n"
    "    0 on success; 1 when a file cannot be read; 2 on a usage error.\n"
    "\n"
    "EXAMPLES\n"
    "    gpucoll_topo\n"
    "    gpucoll_topo --xml dgx_h100.xml --nvlinks dgx_h100.nvlinks\n"
    "    gpucoll_topo --xml pcie_4gpu.xml --gpus 0,2,1,3 --json\n"
    "    gpucoll_topo --model h100-nvswitch --nodes 4 --coll allreduce --sizes 1K:1G\n"
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

bool parse_size(const char* s, const char** end, size_t* out) {
    char* e = nullptr;
    const unsigned long long v = std::strtoull(s, &e, 10);
    if (e == s) return false;
    size_t mult = 1;
    if (*e == 'K' || *e == 'k') mult = size_t{1} << 10;
    if (*e == 'M' || *e == 'm') mult = size_t{1} << 20;
    if (*e == 'G' || *e == 'g') mult = size_t{1} << 30;
    if (mult != 1) ++e;
    if (*s == '-' || v > (size_t{1} << 40) / mult) return false;  // no wrap-around
    *out = static_cast<size_t>(v) * mult;
    *end = e;
    return v > 0;
}

bool parse_sizes(const char* s, size_t* lo, size_t* hi) {
    const char* e = nullptr;
    if (!parse_size(s, &e, lo) || *e != ':') return false;
    if (!parse_size(e + 1, &e, hi) || *e != '\0') return false;
    return *lo <= *hi && *hi <= (size_t{1} << 40);
}

std::string human(size_t b) {
    char s[32];
    if (b >= (size_t{1} << 30) && b % (size_t{1} << 30) == 0)
        std::snprintf(s, sizeof s, "%zuG", b >> 30);
    else if (b >= (size_t{1} << 20) && b % (size_t{1} << 20) == 0)
        std::snprintf(s, sizeof s, "%zuM", b >> 20);
    else if (b >= (size_t{1} << 10) && b % (size_t{1} << 10) == 0)
        std::snprintf(s, sizeof s, "%zuK", b >> 10);
    else
        std::snprintf(s, sizeof s, "%zu", b);
    return s;
}

// One table per collective: a row per size, time (us) and busbw (GB/s) of
// every algorithm the table has for the shape, and the fastest.
void print_model(const gpucoll::topo::ModelParams& p, gpucoll::topo::Shape shape,
                 gpucoll_coll_t coll, size_t lo, size_t hi) {
    using namespace gpucoll::topo;
    std::vector<gpucoll_algorithm_t> algos;
    for (const Choice& c : rank_algorithms(coll, lo, shape, p)) algos.push_back(c.algo);
    std::sort(algos.begin(), algos.end());
    std::printf("\n%s on %d node(s) x %d rank(s): predicted time (us) / busbw (GB/s)\n",
                gpucoll_coll_name(coll), shape.nodes, shape.ranks_per_node);
    std::printf("%8s", "bytes");
    for (gpucoll_algorithm_t a : algos) std::printf("  %19s", gpucoll_algorithm_name(a));
    std::printf("  %s\n", "fastest");
    for (size_t b = lo; b <= hi; b *= 2) {
        std::printf("%8s", human(b).c_str());
        const std::vector<Choice> ranked = rank_algorithms(coll, b, shape, p);
        for (gpucoll_algorithm_t a : algos) {
            const Prediction pr = predict(coll, a, b, shape, p);
            if (!pr.applicable)
                std::printf("  %19s", "-");
            else
                std::printf("  %11.1f / %5.1f", pr.time_us, pr.busbw_GBps);
        }
        // Non-finite predictions are ranked last: none finite, no fastest.
        const bool known = !ranked.empty() && std::isfinite(ranked[0].prediction.time_us);
        std::printf("  %s\n", known ? gpucoll_algorithm_name(ranked[0].algo) : "-");
        if (b > hi / 2) break;  // no overflow past hi
    }
}

}  // namespace

int main(int argc, char** argv) {
    gpucoll::topo::Sources sources;
    bool json = false;
    long ranks = 0;
    std::vector<int> gpus;
    std::string model, backend;
    size_t one_shot_max = 0;
    long nodes = 1, per_node = 8;
    std::string coll_name = "allreduce";
    size_t lo = 8, hi = size_t{1} << 30;
    bool print_params = false;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
            std::fputs(kHelp, stdout);
            return 0;
        } else if (!std::strcmp(a, "--json")) {
            json = true;
        } else if (!std::strcmp(a, "--xml")) {
            const char* v = value();
            if (v == nullptr) return usage("--xml needs a file");
            sources.xml_file = v;
        } else if (!std::strcmp(a, "--nvlinks")) {
            const char* v = value();
            if (v == nullptr) return usage("--nvlinks needs a file");
            sources.links_file = v;
        } else if (!std::strcmp(a, "--ranks")) {
            const char* v = value();
            char* end = nullptr;
            ranks = v == nullptr ? 0 : std::strtol(v, &end, 10);
            if (v == nullptr || *end != '\0' || ranks < 1 || ranks > 4096)
                return usage("--ranks needs a count of 1..4096");
        } else if (!std::strcmp(a, "--gpus")) {
            const char* v = value();
            if (v == nullptr || !parse_list(v, &gpus))
                return usage("--gpus needs a comma-separated list of GPU indices");
        } else if (!std::strcmp(a, "--model")) {
            const char* v = value();
            if (v == nullptr) return usage("--model needs a preset or a params file");
            model = v;
        } else if (!std::strcmp(a, "--backend")) {
            const char* v = value();
            if (v == nullptr || (std::strcmp(v, "emu") != 0 && std::strcmp(v, "cuda") != 0))
                return usage("--backend needs emu or cuda");
            backend = v;
        } else if (!std::strcmp(a, "--one-shot-max")) {
            const char* v = value();
            const char* end = nullptr;
            if (v == nullptr ||
                (std::strcmp(v, "0") != 0 && (!parse_size(v, &end, &one_shot_max) || *end != '\0')))
                return usage("--one-shot-max needs bytes (suffixes K M G), at most 1T");
        } else if (!std::strcmp(a, "--nodes") || !std::strcmp(a, "--ranks-per-node")) {
            const char* v = value();
            char* end = nullptr;
            const long n = v == nullptr ? 0 : std::strtol(v, &end, 10);
            if (v == nullptr || *end != '\0' || n < 1 || n > 65536)
                return usage((std::string(a) + " needs a count of 1..65536").c_str());
            (!std::strcmp(a, "--nodes") ? nodes : per_node) = n;
        } else if (!std::strcmp(a, "--coll")) {
            const char* v = value();
            if (v == nullptr) return usage("--coll needs a collective");
            coll_name = v;
        } else if (!std::strcmp(a, "--sizes")) {
            const char* v = value();
            if (v == nullptr || !parse_sizes(v, &lo, &hi))
                return usage("--sizes needs MIN:MAX in bytes (suffixes K M G), MIN <= MAX");
        } else if (!std::strcmp(a, "--params")) {
            print_params = true;
        } else {
            return usage((std::string("unknown option ") + a).c_str());
        }
    }
    if ((!backend.empty() || one_shot_max != 0) && model.empty())
        return usage("--backend and --one-shot-max go with --model");
    if (!model.empty()) {
        if (backend.empty()) backend = model == "emu" ? "emu" : "cuda";
        gpucoll::topo::ModelParams p;
        std::string error;
        // The component's reading of coll_gpucoll_cost_model, on that backend.
        if (!gpucoll::topo::resolve_model(model, backend, &p, &error)) {
            std::fprintf(stderr, "gpucoll_topo: --model: %s\n", error.c_str());
            return 1;
        }
        if (print_params) {
            std::fputs(gpucoll::topo::format_params(p).c_str(), stdout);
            return 0;
        }
        std::vector<gpucoll_coll_t> colls;
        for (int c = 0; c < GPUCOLL_COLL_REDUCE_LOCAL; ++c)
            if (coll_name == "all" ||
                coll_name == gpucoll_coll_name(static_cast<gpucoll_coll_t>(c)))
                colls.push_back(static_cast<gpucoll_coll_t>(c));
        if (colls.empty()) return usage(("unknown collective " + coll_name).c_str());
        std::printf("Model: %s\nSource: %s\nBackend: %s (a params file's missing keys: %s)\n",
                    p.name.c_str(), p.source.c_str(), backend.c_str(),
                    gpucoll::topo::base_preset(backend).c_str());
        const gpucoll::topo::Shape shape{static_cast<int>(per_node), static_cast<int>(nodes)};
        for (gpucoll_coll_t c : colls) print_model(p, shape, c, lo, hi);
        if (nodes == 1) {  // what coll_gpucoll_cost_model makes the selection pick
            // The slot the node communicator would have on that backend.
            const size_t slot = gpucoll::intra::one_shot_slot_bytes(
                gpucoll::intra::one_shot_max_bytes(backend, one_shot_max));
            gpucoll::topo::ModelTable table;
            table.build(p, shape.ranks_per_node, slot);
            std::printf(
                "\nSelection with coll_gpucoll_cost_model on %s (%d ranks, one-shot up to its "
                "%s scratch slot):\n  %s\n",
                backend.c_str(), shape.ranks_per_node, human(slot).c_str(),
                table.summary().c_str());
        }
        return 0;
    }
    if (print_params) return usage("--params goes with --model");
    if (!sources.links_file.empty() && sources.xml_file.empty())
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

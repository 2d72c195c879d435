// report.cc - text and JSON views of a Machine and the decisions on it.
#include "topo/report.h"

#include <cstdio>
#include <numeric>
#include <sstream>

namespace gpucoll::topo {

namespace {

std::string gpu_label(size_t g) { return "GPU" + std::to_string(g); }
std::string nic_label(size_t n) { return "NIC" + std::to_string(n); }

std::string pad(const std::string& s, size_t w) {
    return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
}

std::string json_string(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", c);
            o += esc;
        } else {
            o += c;
        }
    }
    return o + "\"";
}

std::vector<int> ranks_or_default(const ReportInput& in) {
    return in.gpu_of_rank.empty() ? one_rank_per_gpu(*in.machine) : in.gpu_of_rank;
}

const char* family_name(Family f) { return f == Family::RING ? "ring" : "direct"; }

}  // namespace

std::vector<int> one_rank_per_gpu(const Machine& m) {
    std::vector<int> r(m.gpus.size());
    std::iota(r.begin(), r.end(), 0);
    return r;
}

std::string format_text(const ReportInput& in) {
    const Machine& m = *in.machine;
    std::ostringstream o;
    o << "Source: " << m.source << "\n";
    o << "NVLinks: " << (m.links_source.empty() ? "none" : m.links_source) << "\n";
    o << "GPUs: " << m.gpus.size() << ", NICs: " << m.nics.size() << "\n";
    o << "CPUs: " << m.packages << " package(s), " << m.numa_nodes << " NUMA node(s), " << m.cores
      << " core(s), " << m.pus << " hardware thread(s)\n";
    for (const std::string& note : m.notes) o << "Note: " << note << "\n";

    const size_t ng = m.gpus.size(), nn = m.nics.size();
    if (ng + nn > 0) {
        o << "\n" << pad("", 8);
        for (size_t g = 0; g < ng; ++g) o << pad(gpu_label(g), 7);
        for (size_t n = 0; n < nn; ++n) o << pad(nic_label(n), 7);
        o << pad("CPU Affinity", 14) << "NUMA Affinity\n";
        for (size_t g = 0; g < ng; ++g) {
            o << pad(gpu_label(g), 8);
            for (size_t h = 0; h < ng; ++h)
                o << pad(to_string(gpu_to_gpu(m, static_cast<int>(g), static_cast<int>(h))), 7);
            for (size_t n = 0; n < nn; ++n)
                o << pad(path_name(pci_path(m.gpus[g], m.nics[n], m)), 7);
            o << pad(m.gpus[g].cpuset.empty() ? "N/A" : m.gpus[g].cpuset, 14)
              << (m.gpus[g].numa < 0 ? std::string("N/A") : std::to_string(m.gpus[g].numa)) << "\n";
        }
        for (size_t n = 0; n < nn; ++n) {
            o << pad(nic_label(n), 8);
            for (size_t g = 0; g < ng; ++g)
                o << pad(path_name(pci_path(m.nics[n], m.gpus[g], m)), 7);
            for (size_t k = 0; k < nn; ++k)
                o << pad(path_name(pci_path(m.nics[n], m.nics[k], m)), 7);
            o << pad(m.nics[n].cpuset.empty() ? "N/A" : m.nics[n].cpuset, 14)
              << (m.nics[n].numa < 0 ? std::string("N/A") : std::to_string(m.nics[n].numa)) << "\n";
        }
        o << "\n";
        for (size_t g = 0; g < ng; ++g)
            o << pad(gpu_label(g) + ":", 8) << m.gpus[g].bus_id
              << (m.gpus[g].name.empty() ? "" : " (" + m.gpus[g].name + ")") << "\n";
        for (size_t n = 0; n < nn; ++n)
            o << pad(nic_label(n) + ":", 8) << m.nics[n].bus_id << " " << m.nics[n].name
              << (m.nics[n].rdma ? " (RDMA)" : " (no RDMA)") << "\n";
        o << "\nLegend: X = self; NV# = # NVLinks (through NVSwitches where both GPUs have "
             "them); PIX = one PCIe switch; PXB = several PCIe bridges, no host bridge; "
             "PHB = through a PCIe host bridge (the CPU); NODE = between host bridges of one "
             "NUMA node; SYS = across the CPUs' interconnect (NUMA nodes)\n";
    }

    if (ng > 0) {
        const std::vector<NicChoice> nics = nic_per_gpu(m);
        o << "\nNIC per GPU (rail: the closest RDMA device with an active port, GPUs spread "
             "over equally close ones, UCX_NET_DEVICES; without one, the closest network "
             "device and UCX chooses; GPUDirect RDMA where the rail is at PXB or closer):\n";
        for (size_t g = 0; g < ng; ++g) {
            o << "  " << pad(gpu_label(g), 6);
            if (nics[g].nic < 0) {
                o << "none\n";
                continue;
            }
            const Nic& nic = m.nics[static_cast<size_t>(nics[g].nic)];
            o << pad(nic.name, 10) << pad(path_name(nics[g].path), 5)
              << (nics[g].rail ? "rail  " : "no rail (UCX chooses)  ") << "GPUDirect RDMA: "
              << (nics[g].gpudirect ? "yes"
                  : nics[g].rail    ? "no (too far)"
                                    : "no (no RDMA)")
              << "\n";
        }
        const std::vector<int> ranks = ranks_or_default(in);
        const Layout layout = choose_layout(m, ranks);
        o << "\nLocal ranks: " << ranks.size() << " (rank -> GPU:";
        for (size_t r = 0; r < ranks.size(); ++r) o << " " << r << "->" << ranks[r];
        o << ")\nRing order:";
        for (int r : layout.ring) o << " " << r;
        o << "\nAlgorithm family: " << family_name(layout.family) << " (" << layout.why << ")\n";
    }
    return o.str();
}

std::string format_json(const ReportInput& in) {
    const Machine& m = *in.machine;
    std::ostringstream o;
    o << "{\n  \"source\": " << json_string(m.source)
      << ",\n  \"nvlinks_source\": " << json_string(m.links_source)
      << ",\n  \"packages\": " << m.packages << ", \"numa_nodes\": " << m.numa_nodes
      << ", \"cores\": " << m.cores << ", \"pus\": " << m.pus << ",\n  \"notes\": [";
    for (size_t i = 0; i < m.notes.size(); ++i) o << (i ? ", " : "") << json_string(m.notes[i]);
    o << "],\n  \"gpus\": [";
    const std::vector<NicChoice> nics = nic_per_gpu(m);
    for (size_t g = 0; g < m.gpus.size(); ++g) {
        const Gpu& gpu = m.gpus[g];
        o << (g ? "," : "") << "\n    {\"index\": " << g
          << ", \"bus_id\": " << json_string(gpu.bus_id) << ", \"name\": " << json_string(gpu.name)
          << ", \"numa\": " << gpu.numa << ", \"cpuset\": " << json_string(gpu.cpuset)
          << ", \"links\": [";
        for (size_t h = 0; h < m.gpus.size(); ++h)
            o << (h ? ", " : "")
              << json_string(to_string(gpu_to_gpu(m, static_cast<int>(g), static_cast<int>(h))));
        o << "], \"nic_paths\": [";
        for (size_t n = 0; n < m.nics.size(); ++n)
            o << (n ? ", " : "") << json_string(path_name(pci_path(gpu, m.nics[n], m)));
        o << "], \"nic\": " << nics[g].nic << ", \"rail\": " << (nics[g].rail ? "true" : "false")
          << ", \"gpudirect\": " << (nics[g].gpudirect ? "true" : "false") << "}";
    }
    o << "\n  ],\n  \"nics\": [";
    for (size_t n = 0; n < m.nics.size(); ++n)
        o << (n ? "," : "") << "\n    {\"index\": " << n
          << ", \"bus_id\": " << json_string(m.nics[n].bus_id)
          << ", \"name\": " << json_string(m.nics[n].name)
          << ", \"netdev\": " << json_string(m.nics[n].netdev)
          << ", \"rdma\": " << (m.nics[n].rdma ? "true" : "false")
          << ", \"numa\": " << m.nics[n].numa << "}";
    o << "\n  ]";
    if (!m.gpus.empty()) {
        const std::vector<int> ranks = ranks_or_default(in);
        const Layout layout = choose_layout(m, ranks);
        o << ",\n  \"gpu_of_rank\": [";
        for (size_t r = 0; r < ranks.size(); ++r) o << (r ? ", " : "") << ranks[r];
        o << "],\n  \"ring\": [";
        for (size_t i = 0; i < layout.ring.size(); ++i) o << (i ? ", " : "") << layout.ring[i];
        o << "],\n  \"family\": " << json_string(family_name(layout.family))
          << ",\n  \"family_why\": " << json_string(layout.why);
    }
    o << "\n}\n";
    return o.str();
}

}  // namespace gpucoll::topo

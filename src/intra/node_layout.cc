// node_layout.cc - the topology's part in a node communicator.
#include "intra/node_layout.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <utility>
#include <vector>

#include "common/immortal.h"
#include "common/machine.h"
#include "topo/report.h"

namespace gpucoll::intra {

const topo::Machine* node_machine(const std::string& xml_file, const std::string& nvlink_file,
                                  std::string* error) {
    // Discovery reads the whole PCI tree (milliseconds): once per process and
    // pair of files. Entries are never removed, so pointers stay valid.
    static std::mutex lock;
    // Never destroyed: a communicator created at exit still finds it.
    static Immortal<std::map<std::pair<std::string, std::string>,
                             std::pair<std::unique_ptr<topo::Machine>, std::string>>>
        known;
    std::lock_guard<std::mutex> guard(lock);
    auto& entry = (*known)[{xml_file, nvlink_file}];
    if (entry.first == nullptr && entry.second.empty()) {
        auto m = std::make_unique<topo::Machine>();
        topo::Sources sources;
        sources.xml_file = xml_file;
        sources.links_file = nvlink_file;
        if (topo::discover(sources, m.get()) == kSuccess)
            entry.first = std::move(m);
        else
            entry.second = last_error();
    }
    *error = entry.second;
    return entry.first.get();
}

uint64_t machine_fingerprint(const topo::Machine& m) {
    // Exactly what the layout is computed from: the GPUs, their places in
    // the PCI tree (tree order beyond 10 ranks) and the connection of every
    // pair; not CPU sets or NICs, which may differ between the ranks' views
    // (cgroups) without changing the layout.
    std::string text;
    for (size_t g = 0; g < m.gpus.size(); ++g) {
        text += m.gpus[g].bus_id + "<";
        for (int b : m.gpus[g].bridges)
            text += std::to_string(m.bridges[static_cast<size_t>(b)].order) + ",";
        for (size_t h = 0; h < m.gpus.size(); ++h)
            text += topo::to_string(topo::gpu_to_gpu(m, static_cast<int>(g), static_cast<int>(h))) +
                    " ";
        text += ";";
    }
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return h == 0 ? 1 : h;
}

LayoutVote vote_layout(const gpucoll_comm_config_t& config, int node_rank, int node_size,
                       const std::string& bus_id, const topo::Machine** machine,
                       std::string* error) {
    LayoutVote v;
    *machine = nullptr;
    error->clear();
    const std::string xml = config.topology_file != nullptr ? config.topology_file : "";
    const std::string links = config.nvlink_file != nullptr ? config.nvlink_file : "";
    // Two ranks have one link between them whatever the topology; a rank
    // without a PCI bus id has no place in a discovered machine.
    if (node_size <= 2 || (bus_id.empty() && xml.empty())) return v;
    const topo::Machine* m = node_machine(xml, links, error);
    if (m == nullptr) return v;
    *machine = m;
    v.fingerprint = machine_fingerprint(*m);
    if (!bus_id.empty()) {
        v.gpu = m->gpu_by_bus_id(bus_id);
    } else {  // emu with a topology file: play a GPU of the file
        const char* forced = std::getenv("GPUCOLL_EMU_GPU");
        char* end = nullptr;
        const long g = forced != nullptr ? std::strtol(forced, &end, 10) : node_rank;
        const bool valid = forced == nullptr || (end != forced && *end == '\0');
        v.gpu = valid && g >= 0 && g < static_cast<long>(m->gpus.size()) ? static_cast<int>(g) : -1;
    }
    return v;
}

std::string rail_device_of(const std::string& list, int ordinal, const std::string& bus_id) {
    std::vector<std::string> entries(1);
    for (char c : list) {
        if (c == ',')
            entries.emplace_back();
        else if (c != ' ' && c != '\t')
            entries.back() += c == '+' ? ',' : c;
    }
    // "BUSID=NIC" entries name the GPU by its PCI bus id (the same on every
    // process, whatever CUDA_VISIBLE_DEVICES numbers it): any of them makes
    // the list one of those, and a GPU not in it gets UCX's choice.
    const auto lower = [](std::string t) {
        for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return t;
    };
    bool by_bus = false;
    for (const std::string& e : entries) {
        const size_t eq = e.find('=');
        if (eq == std::string::npos) continue;
        by_bus = true;
        if (!bus_id.empty() && lower(e.substr(0, eq)) == lower(bus_id)) return e.substr(eq + 1);
    }
    if (by_bus || ordinal < 0) return {};
    return entries[static_cast<size_t>(ordinal) % entries.size()];
}

std::string rail_net_device(const gpucoll_comm_config_t& config, int ordinal,
                            const std::string& gpu_bus_id, std::string* why) {
    const char* user = std::getenv("UCX_NET_DEVICES");
    if (config.rails == 0) {
        *why = "rails off (coll_gpucoll_rails)";
        return {};
    }
    if (config.rail_devices != nullptr && *config.rail_devices != '\0') {
        if (ordinal < 0) {
            *why = "no GPU chosen yet";
            return {};
        }
        std::string nic = rail_device_of(config.rail_devices, ordinal, gpu_bus_id);
        *why = nic.empty() ? "coll_gpucoll_rail_devices leaves GPU " + std::to_string(ordinal) +
                                 "'s NIC to UCX"
                           : "coll_gpucoll_rail_devices for GPU " + std::to_string(ordinal);
        return nic;
    }
    if (user != nullptr && *user != '\0') {
        *why = "UCX_NET_DEVICES set by the user";
        return {};
    }
    // One process per node keeps every NIC (UCX spreads over them).
    if (launcher_local_processes() < 2) {
        *why = "one process on this machine: UCX may use every NIC";
        return {};
    }
    if (config.topology_file != nullptr && *config.topology_file != '\0') {
        *why = "the topology comes from a file, not from this machine";
        return {};
    }
    if (gpu_bus_id.empty()) {
        *why = "the device has no PCI bus id";
        return {};
    }
    std::string error;
    const topo::Machine* m = node_machine("", "", &error);
    const int gpu = m != nullptr ? m->gpu_by_bus_id(gpu_bus_id) : -1;
    if (gpu < 0) {
        *why = m == nullptr ? error : "the GPU is not in the discovered topology";
        return {};
    }
    return topo::rail_device(*m, gpu, why);
}

topo::Layout agree_layout(const topo::Machine* machine, const std::vector<LayoutVote>& votes) {
    topo::Layout l;
    l.ring.resize(votes.size());
    std::iota(l.ring.begin(), l.ring.end(), 0);
    if (votes.size() <= 2) {
        l.why = "two ranks or fewer";
        return l;
    }
    std::vector<int> gpus;
    for (const LayoutVote& v : votes) {
        if (v.fingerprint == 0 || v.fingerprint != votes[0].fingerprint) {
            l.why = v.fingerprint == 0 ? "topology unknown on some rank"
                                       : "the ranks see different topologies";
            return l;
        }
        if (v.gpu < 0) {
            l.why = "some rank's GPU is not in the topology";
            return l;
        }
        gpus.push_back(v.gpu);
    }
    if (machine == nullptr) {  // cannot happen: a fingerprint means a machine
        l.why = "topology unknown";
        return l;
    }
    return topo::choose_layout(*machine, gpus);
}

}  // namespace gpucoll::intra

// paths.cc - connections between devices and the decisions built on them.
#include "topo/paths.h"

#include <algorithm>
#include <numeric>

namespace gpucoll::topo {

const char* path_name(Path p) {
    switch (p) {
        case Path::SELF:
            return "X";
        case Path::NV:
            return "NV";
        case Path::PIX:
            return "PIX";
        case Path::PXB:
            return "PXB";
        case Path::PHB:
            return "PHB";
        case Path::NODE:
            return "NODE";
        case Path::SYS:
            return "SYS";
    }
    return "?";
}

std::string to_string(const Connection& c) {
    if (c.path == Path::NV) return "NV" + std::to_string(c.nvlinks);
    return path_name(c.path);
}

Path pci_path(const PciDevice& a, const PciDevice& b, const Machine& m) {
    if (&a == &b || a.bus_id == b.bus_id) return Path::SELF;
    // The lowest common bridge: i and j bridges above a and b.
    for (size_t i = 0; i < a.bridges.size(); ++i) {
        const auto at = std::find(b.bridges.begin(), b.bridges.end(), a.bridges[i]);
        if (at == b.bridges.end()) continue;
        const size_t j = static_cast<size_t>(at - b.bridges.begin());
        if (m.bridges[static_cast<size_t>(a.bridges[i])].host) return Path::PHB;
        return i <= 1 && j <= 1 ? Path::PIX : Path::PXB;
    }
    // Different host bridges: one NUMA node, or across the CPUs.
    if (a.numa >= 0 && a.numa == b.numa) return Path::NODE;
    if (a.numa < 0 && b.numa < 0 && a.package >= 0 && a.package == b.package) return Path::NODE;
    return Path::SYS;
}

Connection gpu_to_gpu(const Machine& m, int a, int b) {
    if (a == b) return {Path::SELF, 0};
    const size_t ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    int links = 0;
    if (ua < m.links.size() && ub < m.links.size()) {
        const auto direct = m.links[ua].to_gpu.find(b);
        if (direct != m.links[ua].to_gpu.end()) links += direct->second;
        if (m.links[ua].to_switch > 0 && m.links[ub].to_switch > 0)
            links += std::min(m.links[ua].to_switch, m.links[ub].to_switch);
    }
    if (links > 0) return {Path::NV, links};
    return {pci_path(m.gpus[ua], m.gpus[ub], m), 0};
}

std::vector<NicChoice> nic_per_gpu(const Machine& m) {
    std::vector<NicChoice> out(m.gpus.size());
    auto is_rail = [](const Nic& n) { return n.rdma && n.usable; };
    const bool rails = std::any_of(m.nics.begin(), m.nics.end(), is_rail);
    std::vector<int> users(m.nics.size(), 0);
    for (size_t g = 0; g < m.gpus.size(); ++g) {
        NicChoice best;
        for (size_t n = 0; n < m.nics.size(); ++n) {
            // Rails: RDMA devices with an active port only. None: the plain
            // network devices (an RDMA device without one is down).
            if (rails ? !is_rail(m.nics[n]) : m.nics[n].rdma) continue;
            const Path p = pci_path(m.gpus[g], m.nics[n], m);
            if (best.nic < 0 || p < best.path ||
                (rails && p == best.path && users[n] < users[static_cast<size_t>(best.nic)])) {
                best.nic = static_cast<int>(n);
                best.path = p;
            }
        }
        if (best.nic >= 0 && rails) {
            ++users[static_cast<size_t>(best.nic)];
            best.rail = true;
            best.gpudirect = best.path <= Path::PXB;
        }
        out[g] = best;
    }
    return out;
}

std::string ucx_device_name(const Nic& nic) {
    return nic.rdma ? nic.name + ":" + std::to_string(nic.port)
                    : (nic.netdev.empty() ? nic.name : nic.netdev);
}

std::string rail_device(const Machine& m, int gpu, std::string* why) {
    if (gpu < 0 || static_cast<size_t>(gpu) >= m.gpus.size()) {
        *why = "the GPU is not in the topology";
        return {};
    }
    const NicChoice c = nic_per_gpu(m)[static_cast<size_t>(gpu)];
    if (c.nic < 0) {
        *why = "no network device found";
        return {};
    }
    const Nic& nic = m.nics[static_cast<size_t>(c.nic)];
    if (!c.rail) {
        *why = "no RDMA device with an active port (the nearest network device, " + nic.name +
               ", may be a management or unconnected port): UCX chooses";
        return {};
    }
    *why = std::string("the RDMA device nearest the GPU (") + path_name(c.path) +
           (c.gpudirect ? ", GPUDirect RDMA" : "") + ")";
    return ucx_device_name(nic);
}

bool full_nvlink_mesh(const Machine& m, const std::vector<int>& gpus) {
    for (size_t i = 0; i < gpus.size(); ++i)
        for (size_t j = i + 1; j < gpus.size(); ++j) {
            if (gpus[i] < 0 || gpus[j] < 0) return false;
            if (gpus[i] == gpus[j]) continue;  // ranks sharing a GPU
            if (gpu_to_gpu(m, gpus[i], gpus[j]).path != Path::NV) return false;
        }
    return true;
}

namespace {

// The cost of a hop: its path class (slowest first in the comparison), and
// more NVLinks beat fewer.
struct HopCost {
    int worst = 0;  // the slowest hop's class
    int total = 0;  // sum of classes: how often slow links are crossed
    int links = 0;  // NVLinks along the cycle: more is better
    bool operator<(const HopCost& o) const {
        if (worst != o.worst) return worst < o.worst;
        return total != o.total ? total < o.total : links > o.links;
    }
};

struct Hop {
    int cls = static_cast<int>(Path::SYS);
    int links = 0;
};

Hop hop_of(const Machine& m, int ga, int gb) {
    if (ga < 0 || gb < 0) return {};
    const Connection c = gpu_to_gpu(m, ga, gb);
    return {static_cast<int>(c.path), c.nvlinks};
}

HopCost cycle_cost(const std::vector<std::vector<Hop>>& hops, const std::vector<int>& order) {
    HopCost c;
    for (size_t i = 0; i < order.size(); ++i) {
        const Hop& h =
            hops[static_cast<size_t>(order[i])][static_cast<size_t>(order[(i + 1) % order.size()])];
        c.worst = std::max(c.worst, h.cls);
        c.total += h.cls;
        c.links += h.links;
    }
    return c;
}

// Ranks sorted by their GPU's place in the PCI tree (depth-first), which
// crosses each switch once; unknown GPUs last, in rank order.
std::vector<int> tree_order(const Machine& m, const std::vector<int>& gpu_of_rank) {
    std::vector<int> order(gpu_of_rank.size());
    std::iota(order.begin(), order.end(), 0);
    auto key = [&](int r) {
        std::vector<int> k;
        const int g = gpu_of_rank[static_cast<size_t>(r)];
        if (g < 0) return std::vector<int>{1 << 30, r};
        const Gpu& gpu = m.gpus[static_cast<size_t>(g)];
        for (auto it = gpu.bridges.rbegin(); it != gpu.bridges.rend(); ++it)
            k.push_back(m.bridges[static_cast<size_t>(*it)].order);
        k.push_back(g);
        k.push_back(r);
        return k;
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
    // Start at rank 0, as every other order does.
    std::rotate(order.begin(), std::find(order.begin(), order.end(), 0), order.end());
    return order;
}

}  // namespace

std::vector<int> ring_order(const Machine& m, const std::vector<int>& gpu_of_rank) {
    const size_t n = gpu_of_rank.size();
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    if (n <= 3) return order;  // every cycle of three is the same ring
    if (std::any_of(gpu_of_rank.begin(), gpu_of_rank.end(), [](int g) { return g < 0; }))
        return order;
    if (n > 10) return tree_order(m, gpu_of_rank);
    std::vector<std::vector<Hop>> cls(n, std::vector<Hop>(n));
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) cls[i][j] = hop_of(m, gpu_of_rank[i], gpu_of_rank[j]);
    // Rank 0 first; every permutation of the rest, in lexicographic order,
    // so that the first best one is the same on every rank.
    std::vector<int> best = order;
    HopCost best_cost = cycle_cost(cls, best);
    while (std::next_permutation(order.begin() + 1, order.end())) {
        const HopCost c = cycle_cost(cls, order);
        if (c < best_cost) {
            best_cost = c;
            best = order;
        }
    }
    return best;
}

Layout choose_layout(const Machine& m, const std::vector<int>& gpu_of_rank) {
    Layout l;
    l.ring = ring_order(m, gpu_of_rank);
    if (std::any_of(gpu_of_rank.begin(), gpu_of_rank.end(), [](int g) { return g < 0; })) {
        l.why = "the ranks' GPUs are not all known: size thresholds only";
        return l;
    }
    if (gpu_of_rank.size() <= 2) {
        l.why = "two GPUs or fewer: every algorithm uses the one link";
        return l;
    }
    std::vector<int> distinct = gpu_of_rank;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if (distinct.size() == 1) {
        l.why = "every rank on the same GPU: all read their peers at once";
        return l;
    }
    if (full_nvlink_mesh(m, gpu_of_rank)) {
        l.why = distinct.size() < gpu_of_rank.size()
                    ? "the ranks' GPUs are all joined by NVLink (some ranks share a GPU): all "
                      "read their peers at once"
                    : "every pair of GPUs is joined by NVLink: all read their peers at once";
        return l;
    }
    l.family = Family::RING;
    l.why =
        "not every pair of GPUs is joined by NVLink (PCIe or a partial mesh): each GPU "
        "talks only to its ring neighbours";
    return l;
}

}  // namespace gpucoll::topo

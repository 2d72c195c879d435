// discover.cc - a Machine from hwloc: this machine, or an hwloc XML file
// that describes another one. GPUs are NVIDIA display/3D controllers; NICs
// are network controllers with an OpenFabrics or network OS device. NVLinks
// come from a description file where one is given, else from the hwloc
// topology's NVLinkBandwidth distances (what hwloc's NVML backend records,
// also in the XML files lstopo writes), else from NVML on this machine.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/text_file.h"
#include "config.h"
#include "topo/topology.h"

#if GPUCOLL_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace gpucoll::topo {

namespace {

// One entry of hwloc's NVLinkBandwidth matrix between a GPU and another GPU
// or an NVSwitch, as PCI bus ids (to_switch: the peer is a switch).
struct HwlocLink {
    std::string from, to;
    bool to_switch = false;
    int links = 0;
};

// hwloc's NVML backend records each pair's bandwidth as links x the per-link
// bandwidth of the NVLink version (MB/s): 20000 for NVLink 1, 25000 after.
int links_of_bandwidth(uint64_t mbps) {
    if (mbps == 0) return 0;
    const uint64_t per = mbps % 25000 == 0 ? 25000 : mbps % 20000 == 0 ? 20000 : 25000;
    return static_cast<int>(std::max<uint64_t>(1, (mbps + per / 2) / per));
}

}  // namespace

int Machine::gpu_by_bus_id(const std::string& bus_id) const {
    const std::string want = normalize_bus_id(bus_id);
    for (size_t i = 0; i < gpus.size(); ++i)
        if (gpus[i].bus_id == want) return static_cast<int>(i);
    return -1;
}

std::string normalize_bus_id(const std::string& s) {
    unsigned long domain = 0;
    unsigned bus = 0, dev = 0, fn = 0;
    char tail = 0;
    if (std::sscanf(s.c_str(), "%lx:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4 ||
        domain > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
        return {};
    char out[16];
    std::snprintf(out, sizeof out, "%04lx:%02x:%02x.%x", domain, bus, dev, fn);
    return out;
}

#if GPUCOLL_HAVE_HWLOC

namespace {

using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;

constexpr unsigned kNvidia = 0x10de;

bool is_nvidia_gpu(const PciAttr& p) {
    const unsigned base = p.class_id >> 8;  // 0x03: display controller (VGA 0x0300, 3D 0x0302)
    return p.vendor_id == kNvidia && base == 0x03;
}

bool is_network(const PciAttr& p) {
    return (p.class_id >> 8) == 0x02;  // network controller: Ethernet 0x0200, InfiniBand 0x0207
}

std::string bus_id_of(const PciAttr& p) {
    char s[16];
    std::snprintf(s, sizeof s, "%04x:%02x:%02x.%x", static_cast<unsigned>(p.domain), p.bus, p.dev,
                  p.func);
    return s;
}

// RAII for an hwloc topology.
struct HwlocTopology {
    hwloc_topology_t t = nullptr;
    HwlocTopology() = default;
    HwlocTopology(const HwlocTopology&) = delete;
    HwlocTopology& operator=(const HwlocTopology&) = delete;
    ~HwlocTopology() {
        if (t != nullptr) hwloc_topology_destroy(t);
    }
};

class Walker {
public:
    Walker(hwloc_topology_t t, Machine* m) : t_(t), m_(m) {}

    void walk(hwloc_obj_t obj, std::vector<int>& chain) {
        bool pushed = false;
        if (obj->type == HWLOC_OBJ_BRIDGE) {
            Bridge b;
            b.host = obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
            if (!b.host) b.bus_id = bus_id_of(obj->attr->bridge.upstream.pci);
            b.order = static_cast<int>(m_->bridges.size());
            m_->bridges.push_back(b);
            chain.push_back(b.order);
            pushed = true;
        } else if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
            device(obj, chain);
        }
        for (hwloc_obj_t c = obj->first_child; c != nullptr; c = c->next_sibling) walk(c, chain);
        for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) walk(c, chain);
        if (pushed) chain.pop_back();
    }

private:
    void place(hwloc_obj_t obj, const std::vector<int>& chain, PciDevice* d) {
        const PciAttr& p = obj->attr->pcidev;
        d->bus_id = bus_id_of(p);
        d->vendor = p.vendor_id;
        d->device = p.device_id;
        d->pci_class = p.class_id;
        d->bridges.assign(chain.rbegin(), chain.rend());  // nearest first
        hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(t_, obj);
        if (near == nullptr) return;
        // A device hwloc could not place hangs below the root (the whole
        // machine): its NUMA node is unknown, not the first one.
        if (near->parent != nullptr && near->nodeset != nullptr &&
            hwloc_bitmap_weight(near->nodeset) == 1)
            d->numa = hwloc_bitmap_first(near->nodeset);
        hwloc_obj_t pkg = near->type == HWLOC_OBJ_PACKAGE
                              ? near
                              : hwloc_get_ancestor_obj_by_type(t_, HWLOC_OBJ_PACKAGE, near);
        if (pkg != nullptr) d->package = static_cast<int>(pkg->os_index);
        if (near->cpuset != nullptr) {
            char* list = nullptr;
            if (hwloc_bitmap_list_asprintf(&list, near->cpuset) >= 0 && list != nullptr) {
                d->cpuset = list;
                std::free(list);
            }
        }
    }

    // hwloc's Linux backend names each port's state (Port1State = "4":
    // ACTIVE). A device is usable (a rail) only with a port reported
    // active: no such info (an XML file without it) is not known to work.
    static void active_port(hwloc_obj_t osdev, Nic* n) {
        n->usable = false;
        for (int p = 1; p <= 8; ++p) {
            char key[32];
            std::snprintf(key, sizeof key, "Port%dState", p);
            const char* state = hwloc_obj_get_info_by_name(osdev, key);
            if (state != nullptr && std::strcmp(state, "4") == 0) {
                n->port = p;
                n->usable = true;
                return;
            }
        }
    }

    void device(hwloc_obj_t obj, const std::vector<int>& chain) {
        const PciAttr& p = obj->attr->pcidev;
        if (is_nvidia_gpu(p)) {
            Gpu g;
            place(obj, chain, &g);
            for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling)
                if (c->type == HWLOC_OBJ_OS_DEVICE && c->name != nullptr && g.name.empty())
                    g.name = c->name;
            m_->gpus.push_back(std::move(g));
            return;
        }
        Nic n;
        for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) {
            if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
            if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
                n.name = c->name;
                n.rdma = true;
                active_port(c, &n);
            } else if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && n.netdev.empty()) {
                n.netdev = c->name;
            }
        }
        if (!is_network(p) && !n.rdma) return;
        if (n.name.empty()) n.name = n.netdev;
        if (n.name.empty()) return;  // a network controller without a driver: unusable
        place(obj, chain, &n);
        m_->nics.push_back(std::move(n));
    }

    hwloc_topology_t t_;
    Machine* m_;
};

// The PCI device a matrix object stands for: a GPU's OS device (nvml0) is
// its GPU; a PCI device is itself; anything else (the NVLink ports of a
// POWER CPU, recorded as its Package) is not a device here.
hwloc_obj_t pci_of(hwloc_obj_t o) {
    if (o != nullptr && o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;
    return o != nullptr && o->type == HWLOC_OBJ_PCI_DEVICE ? o : nullptr;
}

bool is_nvswitch(hwloc_obj_t pci) {
    if (pci->subtype != nullptr && std::strcmp(pci->subtype, "NVSwitch") == 0) return true;
    const PciAttr& p = pci->attr->pcidev;
    return p.vendor_id == kNvidia && p.class_id == 0x0680;  // "other bridge": NVSwitch
}

// The NVLinks hwloc recorded (distances named NVLinkBandwidth: GPUs, and
// NVSwitches or CPU ports, values in MB/s from row to column). Links to
// CPUs are left out: gpucoll moves data between GPUs.
void read_nvlink_distances(hwloc_topology_t t, std::vector<HwlocLink>* out) {
#if HWLOC_API_VERSION >= 0x00020100
    unsigned nr = 1;
    hwloc_distances_s* d = nullptr;
    if (hwloc_distances_get_by_name(t, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0 ||
        d == nullptr)
        return;
    const unsigned n = d->nbobjs;
    for (unsigned i = 0; i < n; ++i) {
        hwloc_obj_t a = pci_of(d->objs[i]);
        if (a == nullptr || !is_nvidia_gpu(a->attr->pcidev)) continue;
        for (unsigned j = 0; j < n; ++j) {
            hwloc_obj_t b = pci_of(d->objs[j]);
            if (i == j || b == nullptr) continue;
            const int links = links_of_bandwidth(d->values[size_t(i) * n + j]);
            const bool sw = is_nvswitch(b);
            if (links == 0 || (!sw && !is_nvidia_gpu(b->attr->pcidev))) continue;
            out->push_back({bus_id_of(a->attr->pcidev), bus_id_of(b->attr->pcidev), sw, links});
        }
    }
    hwloc_distances_release(t, d);
#else
    (void)t;
    (void)out;
#endif
}

}  // namespace

static Status discover_hwloc(const Sources& sources, Machine* m, std::vector<HwlocLink>* nvlinks) {
    HwlocTopology topo;
    if (hwloc_topology_init(&topo.t) != 0)
        return set_error(GPUCOLL_ERR_SYSTEM, "hwloc_topology_init failed");
    hwloc_topology_set_io_types_filter(topo.t, HWLOC_TYPE_FILTER_KEEP_ALL);
    const char* env_xml = std::getenv("HWLOC_XMLFILE");
    std::string xml = sources.xml_file;
    if (xml.empty() && env_xml != nullptr && *env_xml != '\0') xml = env_xml;
    if (!xml.empty()) {
        if (hwloc_topology_set_xml(topo.t, xml.c_str()) != 0)
            return set_error(GPUCOLL_ERR_INVALID_ARG,
                             "cannot use '%s' as an hwloc XML topology (does it exist? make one "
                             "with 'lstopo --of xml FILE')",
                             xml.c_str());
    }
    if (hwloc_topology_load(topo.t) != 0)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "hwloc could not load the topology%s%s",
                         xml.empty() ? "" : " from ", xml.c_str());
    m->source = xml.empty() ? "this machine (hwloc " HWLOC_VERSION ")" : "hwloc XML file " + xml;
    m->packages = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_PACKAGE);
    m->numa_nodes = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_NUMANODE);
    m->cores = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_CORE);
    m->pus = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_PU);
    std::vector<int> chain;
    Walker(topo.t, m).walk(hwloc_get_root_obj(topo.t), chain);
    read_nvlink_distances(topo.t, nvlinks);
    return kSuccess;
}

#else

static Status discover_hwloc(const Sources& sources, Machine* m, std::vector<HwlocLink>*) {
    if (!sources.xml_file.empty())
        return set_error(GPUCOLL_ERR_UNSUPPORTED,
                         "cannot read '%s': gpucoll was built without hwloc (Debian: apt-get "
                         "install libhwloc-dev, then configure again)",
                         sources.xml_file.c_str());
    m->source = "nothing: gpucoll was built without hwloc";
    m->notes.push_back("built without hwloc: no PCI tree, GPUs or NICs known");
    return kSuccess;
}

#endif

// GPUs are told apart by bus id (ranks vote theirs, CUDA_DEVICE_ORDER sorts
// by it): two devices with one id would be one device to every question
// (their path "X"). hwloc gives 0000:00:00.0 to every PCI device of an XML
// file written without pci_busid attributes.
static Status check_bus_ids_unique(const Machine& m) {
    std::vector<std::pair<std::string, std::string>> ids;  // bus id, what
    for (size_t g = 0; g < m.gpus.size(); ++g)
        ids.emplace_back(m.gpus[g].bus_id,
                         "GPU " + (m.gpus[g].name.empty() ? std::to_string(g) : m.gpus[g].name));
    for (const Nic& n : m.nics) ids.emplace_back(n.bus_id, "NIC " + n.name);
    std::stable_sort(ids.begin(), ids.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 1; i < ids.size(); ++i)
        if (ids[i].first == ids[i - 1].first)
            return set_error(GPUCOLL_ERR_INVALID_ARG,
                             "%s: %s and %s have the same PCI bus id %s (an hwloc XML file "
                             "written without pci_busid attributes?): gpucoll tells devices apart "
                             "by their bus ids",
                             m.source.c_str(), ids[i - 1].second.c_str(), ids[i].second.c_str(),
                             ids[i].first.c_str());
    return kSuccess;
}

Status discover(const Sources& sources, Machine* out) {
    Machine m;
    std::vector<HwlocLink> hwloc_links;
    GPUCOLL_TRY(discover_hwloc(sources, &m, &hwloc_links));
    auto by_bus = [](const PciDevice& a, const PciDevice& b) { return a.bus_id < b.bus_id; };
    std::sort(m.gpus.begin(), m.gpus.end(), by_bus);
    std::sort(m.nics.begin(), m.nics.end(), by_bus);
    GPUCOLL_TRY(check_bus_ids_unique(m));
    m.links.assign(m.gpus.size(), GpuLinks{});
    // A file given to us describes another machine: NVML would describe this
    // one. (HWLOC_XMLFILE is often this machine, exported to save time.)
    const bool from_file = !sources.xml_file.empty();
    // hwloc's record: the file's machine (NVML would describe this one), or
    // this machine's where NVML cannot be asked.
    auto use_hwloc_links = [&] {
        for (const HwlocLink& l : hwloc_links) {
            const int a = m.gpu_by_bus_id(l.from), b = l.to_switch ? -1 : m.gpu_by_bus_id(l.to);
            if (a < 0 || (!l.to_switch && b < 0)) continue;
            if (l.to_switch)
                m.links[size_t(a)].to_switch += l.links;
            else
                m.links[size_t(a)].to_gpu[b] = l.links;
        }
        m.links_source = "the NVLinkBandwidth distances of " + m.source;
    };
    if (!sources.links_file.empty()) {
        GPUCOLL_TRY(load_links_file(sources.links_file, &m));
    } else if (from_file && !hwloc_links.empty()) {
        use_hwloc_links();
    } else if (from_file) {
        // A machine described by a file: NVML would describe this one.
        m.links_source =
            "none (the XML file records no NVLinkBandwidth distances, and no NVLink "
            "description was given with it)";
    } else {
        std::string why;
        if (!query_nvml_links(&m, &why)) {
            if (!hwloc_links.empty())
                use_hwloc_links();
            else
                m.links_source = "none (" + why + ")";
        }
    }
    if (m.gpus.empty()) m.notes.push_back("no NVIDIA GPU found");
    if (m.nics.empty()) m.notes.push_back("no network device with a PCI address found");
    *out = std::move(m);
    return kSuccess;
}

// ---------------------------------------------------------------------------
// NVLink description files
// ---------------------------------------------------------------------------

Status load_links_file(const std::string& path, Machine* m) {
    std::string text, error;
    if (!read_text_file(path, &text, &error))
        return set_error(GPUCOLL_ERR_INVALID_ARG, "NVLink description: %s", error.c_str());
    m->links.assign(m->gpus.size(), GpuLinks{});
    std::istringstream in(text);
    std::string line;
    int lineno = 0, statements = 0;
    while (std::getline(in, line)) {
        ++lineno;
        if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        char word[32], a[64], b[64];
        int count = 0;
        char extra[2];
        const int got =
            std::sscanf(line.c_str(), "%31s %63s %63s %d %1s", word, a, b, &count, extra);
        if (got <= 0) continue;  // blank
        auto bad = [&](const char* what) {
            return set_error(GPUCOLL_ERR_INVALID_ARG,
                             "%s:%d: %s (expected 'nvlink BUSID PEER N', "
                             "PEER a GPU's PCI bus id or 'nvswitch')",
                             path.c_str(), lineno, what);
        };
        if (got != 4 || std::strcmp(word, "nvlink") != 0) return bad("not an nvlink statement");
        if (count <= 0 || count > 64) return bad("the link count must be 1..64");
        const int g = m->gpu_by_bus_id(a);
        if (g < 0) return bad("no GPU of the topology has this bus id");
        ++statements;
        if (std::strcmp(b, "nvswitch") == 0) {
            m->links[g].to_switch = count;
            continue;
        }
        const int h = m->gpu_by_bus_id(b);
        if (h < 0) return bad("the peer is neither 'nvswitch' nor a GPU of the topology");
        if (h == g) return bad("a GPU linked to itself");
        // Either side may state a link; both sides stating it is one link set.
        m->links[g].to_gpu[h] = std::max(m->links[g].to_gpu[h], count);
        m->links[h].to_gpu[g] = std::max(m->links[h].to_gpu[g], count);
    }
    // An empty file is a mistake (a wrong path, a truncated copy), not a
    // machine without NVLinks: that one is described by giving no file.
    if (statements == 0)
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "NVLink description '%s' has no nvlink statement (empty?); for a "
                         "machine without NVLinks give no NVLink description",
                         path.c_str());
    m->links_source = "NVLink description file " + path;
    return kSuccess;
}

}  // namespace gpucoll::topo

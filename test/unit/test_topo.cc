// test_topo.cc - topology discovery over the fixtures of test/topo (hwloc XML
// written by test/topo/make_fixtures.py, expected values in its README), the
// decisions built on it, and how a node communicator and the selection table
// use them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "intra/algorithms.h"
#include "intra/node_layout.h"
#include "intra/one_shot_slot.h"
#include "topo/cost_model.h"
#include "topo/model_table.h"
#include "topo/paths.h"
#include "topo/report.h"
#include "topo/topology.h"

using namespace gpucoll::topo;

namespace {

std::string fixture(const char* name) {
    const char* src = std::getenv("GPUCOLL_SRCDIR");
    return std::string(src != nullptr ? src : ".") + "/test/topo/" + name;
}

Machine load(const char* xml, const char* links = nullptr) {
    Sources s;
    s.xml_file = fixture(xml);
    if (links != nullptr) s.links_file = fixture(links);
    Machine m;
    EXPECT_EQ(discover(s, &m), gpucoll::kSuccess) << gpucoll::last_error();
    return m;
}

std::string conn(const Machine& m, int a, int b) { return to_string(gpu_to_gpu(m, a, b)); }
std::string nic_path(const Machine& m, int g, int n) {
    return path_name(pci_path(m.gpus[static_cast<size_t>(g)], m.nics[static_cast<size_t>(n)], m));
}

// Hops of a ring (ranks in order, gpu_of_rank) by connection class.
int hops_of(const Machine& m, const std::vector<int>& ring, const std::vector<int>& gpu_of_rank,
            Path p) {
    int count = 0;
    for (size_t i = 0; i < ring.size(); ++i) {
        const int a = gpu_of_rank[static_cast<size_t>(ring[i])];
        const int b = gpu_of_rank[static_cast<size_t>(ring[(i + 1) % ring.size()])];
        if (gpu_to_gpu(m, a, b).path == p) ++count;
    }
    return count;
}

std::string write_temp(const std::string& text) {
    char name[] = "/tmp/gpucoll-topo-XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    FILE* f = fdopen(fd, "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return name;
}

}  // namespace

TEST(TopoBusId, Normalized) {
    EXPECT_EQ(normalize_bus_id("00000000:18:00.0"), "0000:18:00.0");  // NVML
    EXPECT_EQ(normalize_bus_id("0000:DB:00.0"), "0000:db:00.0");      // CUDA, upper case
    EXPECT_EQ(normalize_bus_id("0000:18:00.0 "), "");
    EXPECT_EQ(normalize_bus_id("18:00.0"), "");
    EXPECT_EQ(normalize_bus_id("0000:18:20.0"), "");  // device > 0x1f
}

TEST(TopoThisMachine, DiscoversWithoutGpu) {
    Machine m;
    ASSERT_EQ(discover({}, &m), gpucoll::kSuccess);
    EXPECT_GE(m.pus, 1);
    EXPECT_GE(m.numa_nodes, 1);
    if (m.gpus.empty()) {
        const std::string text = format_text({&m, {}});
        EXPECT_NE(text.find("no NVIDIA GPU found"), std::string::npos) << text;
        EXPECT_EQ(text.find("Ring order"), std::string::npos);
    }
}

TEST(TopoFixture, DgxH100) {
    const Machine m = load("dgx_h100.xml", "dgx_h100.nvlinks");
    ASSERT_EQ(m.gpus.size(), 8u);
    ASSERT_EQ(m.nics.size(), 8u);
    EXPECT_EQ(m.packages, 2);
    EXPECT_EQ(m.numa_nodes, 2);
    EXPECT_EQ(m.gpus[0].bus_id, "0000:18:00.0");
    EXPECT_EQ(m.gpus[7].bus_id, "0000:db:00.0");
    EXPECT_EQ(m.gpus[0].name, "cuda0");
    EXPECT_EQ(m.gpus[0].numa, 0);
    EXPECT_EQ(m.gpus[7].numa, 1);
    EXPECT_EQ(m.gpus[4].cpuset, "8-15");
    for (int a = 0; a < 8; ++a)
        for (int b = 0; b < 8; ++b) EXPECT_EQ(conn(m, a, b), a == b ? "X" : "NV18");
    // NIC 2s and 2s+1 share switch s with GPUs 2s and 2s+1.
    for (int g = 0; g < 8; ++g)
        for (int n = 0; n < 8; ++n) {
            const char* want = g / 2 == n / 2 ? "PIX" : g / 4 == n / 4 ? "NODE" : "SYS";
            EXPECT_EQ(nic_path(m, g, n), want) << "GPU" << g << " NIC" << n;
        }
    const std::vector<NicChoice> nics = nic_per_gpu(m);
    for (int g = 0; g < 8; ++g) {
        EXPECT_EQ(nics[static_cast<size_t>(g)].nic, g);
        EXPECT_TRUE(nics[static_cast<size_t>(g)].rail);
        EXPECT_TRUE(nics[static_cast<size_t>(g)].gpudirect);
        EXPECT_EQ(m.nics[static_cast<size_t>(g)].name, "mlx5_" + std::to_string(g));
    }
    const Layout l = choose_layout(m, one_rank_per_gpu(m));
    EXPECT_EQ(l.family, Family::DIRECT) << l.why;
}

TEST(TopoFixture, DgxH100WithoutNvlinksIsPcie) {
    const Machine m = load("dgx_h100.xml");
    EXPECT_EQ(conn(m, 0, 1), "PIX");
    EXPECT_EQ(conn(m, 0, 2), "NODE");
    EXPECT_EQ(conn(m, 0, 4), "SYS");
    const Layout l = choose_layout(m, one_rank_per_gpu(m));
    EXPECT_EQ(l.family, Family::RING);
    // Two socket crossings at least, and no more.
    EXPECT_EQ(hops_of(m, l.ring, one_rank_per_gpu(m), Path::SYS), 2);
    EXPECT_EQ(hops_of(m, l.ring, one_rank_per_gpu(m), Path::PIX), 4);
}

// Ranks sharing one GPU (the lent H100: 3 ranks, one GPU) are direct, and
// the reason says so rather than claiming NVLinks.
TEST(TopoFixture, RanksOnOneGpuAreDirect) {
    const Machine m = load("dgx_h100.xml");  // without NVLinks: PCIe only
    const Layout l = choose_layout(m, {0, 0, 0});
    EXPECT_EQ(l.family, Family::DIRECT);
    EXPECT_NE(l.why.find("same GPU"), std::string::npos) << l.why;
    EXPECT_EQ(l.why.find("NVLink"), std::string::npos) << l.why;
    // Two ranks on each of two PCIe GPUs: the ring family, as for four GPUs.
    EXPECT_EQ(choose_layout(m, {0, 0, 1, 1}).family, Family::RING);
}

TEST(TopoFixture, PcieWorkstation) {
    const Machine m = load("pcie_4gpu.xml");
    ASSERT_EQ(m.gpus.size(), 4u);
    ASSERT_EQ(m.nics.size(), 1u);
    EXPECT_EQ(m.nics[0].name, "eno1");
    EXPECT_FALSE(m.nics[0].rdma);
    EXPECT_EQ(conn(m, 0, 1), "PIX");
    EXPECT_EQ(conn(m, 2, 3), "PIX");
    EXPECT_EQ(conn(m, 0, 2), "PHB");
    EXPECT_EQ(conn(m, 1, 3), "PHB");
    for (int g = 0; g < 4; ++g) {
        EXPECT_EQ(nic_path(m, g, 0), "PHB");
        EXPECT_EQ(nic_per_gpu(m)[static_cast<size_t>(g)].nic, 0);
        EXPECT_FALSE(nic_per_gpu(m)[static_cast<size_t>(g)].gpudirect);
    }
    const Layout l = choose_layout(m, one_rank_per_gpu(m));
    EXPECT_EQ(l.family, Family::RING) << l.why;
    EXPECT_EQ(l.ring, (std::vector<int>{0, 1, 2, 3}));
    // Ranks placed across the switches (rank order would cross the host
    // bridge four times): the ring crosses each switch once.
    const std::vector<int> spread = {0, 2, 1, 3};
    EXPECT_EQ(hops_of(m, std::vector<int>{0, 1, 2, 3}, spread, Path::PHB), 4);
    const std::vector<int> ring = ring_order(m, spread);
    EXPECT_EQ(ring[0], 0);
    EXPECT_EQ(hops_of(m, ring, spread, Path::PHB), 2);
    EXPECT_EQ(hops_of(m, ring, spread, Path::PIX), 2);
}

TEST(TopoFixture, TwoSocketNvlinkPairs) {
    const Machine m = load("two_socket.xml", "two_socket.nvlinks");
    ASSERT_EQ(m.gpus.size(), 4u);
    EXPECT_EQ(conn(m, 0, 1), "NV12");
    EXPECT_EQ(conn(m, 2, 3), "NV12");
    EXPECT_EQ(conn(m, 0, 2), "SYS");
    EXPECT_EQ(nic_path(m, 0, 0), "PHB");
    EXPECT_EQ(nic_path(m, 3, 0), "SYS");
    for (const NicChoice& c : nic_per_gpu(m)) {
        EXPECT_EQ(c.nic, 0);
        EXPECT_FALSE(c.gpudirect);  // an RDMA NIC, but behind the host bridge
    }
    EXPECT_FALSE(full_nvlink_mesh(m, {0, 1, 2, 3}));
    EXPECT_TRUE(full_nvlink_mesh(m, {2, 3}));
    const std::vector<int> spread = {0, 2, 1, 3};
    const Layout l = choose_layout(m, spread);
    EXPECT_EQ(l.family, Family::RING);
    EXPECT_EQ(hops_of(m, l.ring, spread, Path::NV), 2);
    EXPECT_EQ(hops_of(m, l.ring, spread, Path::SYS), 2);
    // Without the NVLink description the pairs are PCIe neighbours.
    const Machine bare = load("two_socket.xml");
    EXPECT_EQ(conn(bare, 0, 1), "PHB");
}

TEST(TopoReport, TextAndJson) {
    const Machine m = load("pcie_4gpu.xml");
    const std::string text = format_text({&m, {}});
    EXPECT_NE(text.find("GPU0    X      PIX    PHB    PHB    PHB"), std::string::npos) << text;
    EXPECT_NE(text.find("Algorithm family: ring"), std::string::npos) << text;
    const std::string json = format_json({&m, {0, 2, 1, 3}});
    EXPECT_NE(json.find("\"family\": \"ring\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"gpu_of_rank\": [0, 2, 1, 3]"), std::string::npos) << json;
}

TEST(TopoLinksFile, ErrorsNameTheLine) {
    const std::string bad = write_temp("# ok\nnvlink 0000:17:00.0 0000:31:00.0 12\nnvlnk x y 1\n");
    Sources s;
    s.xml_file = fixture("two_socket.xml");
    s.links_file = bad;
    Machine m;
    EXPECT_EQ(discover(s, &m), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(gpucoll::last_error()).find(bad + ":3:"), std::string::npos)
        << gpucoll::last_error();
    const std::string unknown = write_temp("nvlink 0000:99:00.0 nvswitch 18\n");
    s.links_file = unknown;
    EXPECT_EQ(discover(s, &m), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(gpucoll::last_error()).find("no GPU of the topology"), std::string::npos);
    s.links_file = "/nonexistent.nvlinks";
    EXPECT_EQ(discover(s, &m), GPUCOLL_ERR_INVALID_ARG);
    std::remove(bad.c_str());
    std::remove(unknown.c_str());
}

// A directory opened fine (ferror unchecked) and an empty file described no
// NVLinks: both passed silently as a machine without NVLinks.
TEST(TopoLinksFile, DirectoriesAndEmptyFilesAreRefused) {
    Sources s;
    s.xml_file = fixture("two_socket.xml");
    Machine m;
    char dir[] = "/tmp/gpucoll-topo-dir-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    s.links_file = dir;
    EXPECT_EQ(discover(s, &m), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(gpucoll::last_error())
                  .find(std::string("cannot read '") + dir + "': Is a directory"),
              std::string::npos)
        << gpucoll::last_error();
    rmdir(dir);
    for (const char* text : {"", "# nothing but a comment\n\n"}) {
        const std::string empty = write_temp(text);
        s.links_file = empty;
        EXPECT_EQ(discover(s, &m), GPUCOLL_ERR_INVALID_ARG) << '"' << text << '"';
        EXPECT_NE(std::string(gpucoll::last_error()).find("has no nvlink statement"),
                  std::string::npos)
            << gpucoll::last_error();
        std::remove(empty.c_str());
    }
    // The cost model's params file the same way (coll_gpucoll_cost_model).
    std::string error;
    char dir2[] = "/tmp/gpucoll-topo-dir-XXXXXX";
    ASSERT_NE(mkdtemp(dir2), nullptr);
    EXPECT_EQ(load_model(dir2, "emu", &error), nullptr);
    EXPECT_NE(error.find("Is a directory"), std::string::npos) << error;
    rmdir(dir2);
}

// An XML written without PCI bus ids gave every GPU 0000:00:00.0: each
// pair of GPUs was "X" (one device) and ranks' bus ids all named GPU 0.
TEST(TopoFixture, DuplicateBusIdsAreAnError) {
    std::ifstream in(fixture("pcie_4gpu.xml"));
    std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const char* gpu : {"03", "04", "2c", "2d"}) {
        const std::string attr = std::string(" pci_busid=\"0000:") + gpu + ":00.0\"";
        const size_t at = xml.find(attr);
        ASSERT_NE(at, std::string::npos) << attr;
        xml.erase(at, attr.size());
    }
    const std::string file = write_temp(xml);
    Sources s;
    s.xml_file = file;
    Machine m;
    EXPECT_EQ(discover(s, &m), GPUCOLL_ERR_INVALID_ARG);
    const std::string error = gpucoll::last_error();
    EXPECT_NE(error.find("GPU cuda0 and GPU cuda1 have the same PCI bus id 0000:00:00.0"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find(file), std::string::npos) << error;
    std::remove(file.c_str());
}

// NVLinks as hwloc records them: a distances matrix named NVLinkBandwidth
// (hwloc's NVML backend; lstopo writes it into the XML file as
// distances2hetero), between GPUs' OS devices, NVSwitches (PCI devices) and
// CPU NVLink ports (Packages), in MB/s: links x 20000 (NVLink 1) or 25000.
namespace hwloc_links {

// The gp_index of the object whose line holds position at, or marker.
std::string gp_at(const std::string& xml, size_t at) {
    const size_t line = xml.rfind('\n', at) + 1;
    const size_t gp = xml.find("gp_index=\"", line) + 10;
    return xml.substr(gp, xml.find('"', gp) - gp);
}
std::string gp_of(const std::string& xml, const std::string& marker) {
    const size_t at = xml.find(marker);
    EXPECT_NE(at, std::string::npos) << marker;
    return gp_at(xml, at);
}

std::string read(const char* name) {
    std::ifstream in(fixture(name));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The fixture xml with a NVLinkBandwidth matrix over objs ("OSDev:25", ...)
// of values (row major, MB/s from row to column), as lstopo writes it.
std::string with_matrix(std::string xml, const std::vector<std::string>& objs,
                        const std::vector<uint64_t>& values) {
    std::string idx, val;
    for (const std::string& o : objs) idx += o + " ";
    for (uint64_t v : values) val += std::to_string(v) + " ";
    const std::string section =
        "  <distances2hetero nbobjs=\"" + std::to_string(objs.size()) +
        "\" kind=\"25\" name=\"NVLinkBandwidth\">\n    <indexes length=\"" +
        std::to_string(idx.size()) + "\">" + idx + "</indexes>\n    <u64values length=\"" +
        std::to_string(val.size()) + "\">" + val + "</u64values>\n  </distances2hetero>\n";
    xml.insert(xml.rfind("</topology>"), section);
    return xml;
}

Machine discover_text(const std::string& xml, const char* links = nullptr) {
    const std::string file = write_temp(xml);
    Sources s;
    s.xml_file = file;
    if (links != nullptr) s.links_file = fixture(links);
    Machine m;
    EXPECT_EQ(discover(s, &m), gpucoll::kSuccess) << gpucoll::last_error();
    std::remove(file.c_str());
    return m;
}

}  // namespace hwloc_links

// An NVSwitch machine: every GPU's 18 links go to 4 switches (5, 4, 4, 5),
// none to another GPU; the four switches here are the fixture's first four
// NICs made NVSwitches (NVIDIA class 0680, as hwloc sees one). The same
// machine as dgx_h100.nvlinks describes.
TEST(TopoHwlocLinks, NvswitchMachineFromTheXmlFile) {
    using namespace hwloc_links;
    std::string xml = read("dgx_h100.xml");
    std::vector<std::string> objs;
    for (int g = 0; g < 8; ++g)
        objs.push_back("OSDev:" + gp_of(xml, "name=\"cuda" + std::to_string(g) + "\""));
    for (int s = 0; s < 4; ++s) {
        const std::string nic = "name=\"mlx5_" + std::to_string(s) + "\"";
        // The NIC's PCI device is the line above its first OS device.
        const size_t os = xml.find(nic);
        const size_t pci = xml.rfind("type=\"PCIDev\"", os);
        const size_t type = xml.find("pci_type=\"", pci) + 10;
        xml.replace(type, 4, "0680");
        const size_t vendor = xml.find('[', type) + 1;
        xml.replace(vendor, 4, "10de");
        objs.push_back("PCIDev:" + gp_at(xml, pci));
    }
    const size_t n = objs.size();
    std::vector<uint64_t> values(n * n, 0);
    const int per_switch[4] = {5, 4, 4, 5};
    for (size_t i = 0; i < n; ++i) values[i * n + i] = 1000000;  // itself: what hwloc writes
    for (size_t g = 0; g < 8; ++g)
        for (size_t s = 0; s < 4; ++s) {
            values[g * n + 8 + s] = uint64_t(per_switch[s]) * 25000;
            values[(8 + s) * n + g] = uint64_t(per_switch[s]) * 25000;
        }
    const Machine m = discover_text(with_matrix(xml, objs, values));
    ASSERT_EQ(m.gpus.size(), 8u);
    for (int a = 0; a < 8; ++a) {
        EXPECT_EQ(m.links[size_t(a)].to_switch, 18) << "GPU" << a;
        EXPECT_TRUE(m.links[size_t(a)].to_gpu.empty()) << "GPU" << a;
        for (int b = 0; b < 8; ++b) EXPECT_EQ(conn(m, a, b), a == b ? "X" : "NV18");
    }
    EXPECT_NE(m.links_source.find("NVLinkBandwidth"), std::string::npos) << m.links_source;
    EXPECT_EQ(choose_layout(m, one_rank_per_gpu(m)).family, Family::DIRECT);
    // A description file still wins over what the XML records.
    const Machine described = discover_text(with_matrix(xml, objs, values), "dgx_h100.nvlinks");
    EXPECT_NE(described.links_source.find("dgx_h100.nvlinks"), std::string::npos);
}

// GPU pairs joined straight (NVLink 1: 20000 MB/s a link, two links: 40000)
// and to their CPU's NVLink ports (a Package in the matrix): the pairs are
// NVLink peers, the CPU links are left out, as on an IBM POWER8 node.
TEST(TopoHwlocLinks, GpuPairsAndCpuPortsFromTheXmlFile) {
    using namespace hwloc_links;
    const std::string xml = read("two_socket.xml");
    std::vector<std::string> objs;
    for (int g = 0; g < 4; ++g)
        objs.push_back("OSDev:" + gp_of(xml, "name=\"cuda" + std::to_string(g) + "\""));
    objs.push_back("Package:" + gp_of(xml, "type=\"Package\" os_index=\"0\""));
    objs.push_back("Package:" + gp_of(xml, "type=\"Package\" os_index=\"1\""));
    const size_t n = objs.size();
    std::vector<uint64_t> values(n * n, 0);
    auto link = [&](size_t a, size_t b, uint64_t v) { values[a * n + b] = values[b * n + a] = v; };
    for (size_t i = 0; i < n; ++i) values[i * n + i] = 1000000;
    link(0, 1, 40000);
    link(2, 3, 40000);
    link(0, 4, 40000);
    link(1, 4, 40000);
    link(2, 5, 40000);
    link(3, 5, 40000);
    const Machine m = discover_text(with_matrix(xml, objs, values));
    ASSERT_EQ(m.gpus.size(), 4u);
    EXPECT_EQ(conn(m, 0, 1), "NV2");
    EXPECT_EQ(conn(m, 2, 3), "NV2");
    EXPECT_EQ(conn(m, 0, 2), "SYS");
    for (const GpuLinks& l : m.links) EXPECT_EQ(l.to_switch, 0);
    EXPECT_TRUE(full_nvlink_mesh(m, {2, 3}));
    EXPECT_FALSE(full_nvlink_mesh(m, {0, 1, 2, 3}));
    // Without the matrix: no NVLink, and the reason says what was looked for.
    const Machine bare = load("two_socket.xml");
    EXPECT_EQ(conn(bare, 0, 1), "PHB");
    EXPECT_NE(bare.links_source.find("no NVLinkBandwidth"), std::string::npos) << bare.links_source;
}

// hwloc's own test topologies from real machines, where the caller has them
// (GPUCOLL_HWLOC_XML_DIR: hwloc's tests/hwloc/xml; not part of this tree):
// the DGX-2 (16 V100, 12 NVSwitches, 6 links each) and the POWER8 node (P100
// pairs, 2 links; and links to the CPUs).
TEST(TopoHwlocLinks, HwlocsRealMachines) {
    const char* dir = std::getenv("GPUCOLL_HWLOC_XML_DIR");
    if (dir == nullptr || *dir == '\0') GTEST_SKIP() << "GPUCOLL_HWLOC_XML_DIR not set";
    Sources s;
    s.xml_file = std::string(dir) + "/nvidiaDGX2.xml";
    Machine dgx;
    ASSERT_EQ(discover(s, &dgx), gpucoll::kSuccess) << gpucoll::last_error();
    ASSERT_EQ(dgx.gpus.size(), 16u);
    for (int a = 0; a < 16; ++a) {
        EXPECT_EQ(dgx.links[size_t(a)].to_switch, 6) << "GPU" << a;
        EXPECT_TRUE(dgx.links[size_t(a)].to_gpu.empty());
    }
    EXPECT_EQ(conn(dgx, 0, 15), "NV6");
    s.xml_file = std::string(dir) + "/power8gpudistances.xml";
    Machine p8;
    ASSERT_EQ(discover(s, &p8), gpucoll::kSuccess) << gpucoll::last_error();
    ASSERT_EQ(p8.gpus.size(), 4u);
    EXPECT_EQ(conn(p8, 0, 1), "NV2");
    EXPECT_EQ(conn(p8, 2, 3), "NV2");
    EXPECT_EQ(conn(p8, 0, 2), "SYS");
}

TEST(TopoLinksFile, MissingXmlIsAnError) {
    Sources s;
    s.xml_file = "/nonexistent.xml";
    Machine m;
    EXPECT_NE(discover(s, &m), gpucoll::kSuccess);
    EXPECT_NE(std::string(gpucoll::last_error()).find("/nonexistent.xml"), std::string::npos);
}

// ---------------------------------------------------------------------------
// How a node communicator uses it
// ---------------------------------------------------------------------------

TEST(TopoNodeLayout, VotesAgree) {
    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    const std::string xml = fixture("pcie_4gpu.xml");
    config.topology_file = xml.c_str();
    std::vector<gpucoll::intra::LayoutVote> votes;
    const Machine* machine = nullptr;
    std::string error;
    unsetenv("GPUCOLL_EMU_GPU");
    for (int r = 0; r < 4; ++r)  // emu: rank r plays GPU r of the file
        votes.push_back(gpucoll::intra::vote_layout(config, r, 4, "", &machine, &error));
    ASSERT_NE(machine, nullptr) << error;
    for (int r = 0; r < 4; ++r) EXPECT_EQ(votes[static_cast<size_t>(r)].gpu, r);
    Layout l = gpucoll::intra::agree_layout(machine, votes);
    EXPECT_EQ(l.family, Family::RING);
    // A rank that saw another machine, or does not know its GPU: rank order, direct.
    votes[2].fingerprint ^= 1;
    l = gpucoll::intra::agree_layout(machine, votes);
    EXPECT_EQ(l.family, Family::DIRECT);
    EXPECT_EQ(l.ring, (std::vector<int>{0, 1, 2, 3}));
    votes[2].fingerprint ^= 1;
    votes[3].gpu = -1;
    EXPECT_EQ(gpucoll::intra::agree_layout(machine, votes).family, Family::DIRECT);
    // Real bus ids are looked up (cuda).
    EXPECT_EQ(gpucoll::intra::vote_layout(config, 0, 4, "0000:2C:00.0", &machine, &error).gpu, 2);
    // Two ranks: no topology needed.
    EXPECT_EQ(gpucoll::intra::vote_layout(config, 0, 2, "", &machine, &error).fingerprint, 0u);
    // An unreadable file: no machine, an error to report, no failure.
    config.topology_file = "/nonexistent.xml";
    EXPECT_EQ(gpucoll::intra::vote_layout(config, 0, 4, "", &machine, &error).fingerprint, 0u);
    EXPECT_EQ(machine, nullptr);
    EXPECT_NE(error.find("/nonexistent.xml"), std::string::npos);
}

TEST(TopoSelection, RingOnPcieDirectOnNvswitch) {
    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    config.one_shot_max_bytes = 16 << 10;
    auto pick = [&](gpucoll_coll_t coll, size_t count, bool ring_links) {
        gpucoll_call_t call{};
        call.coll = coll;
        call.count = count;
        call.dtype = GPUCOLL_FLOAT;
        const char* why = nullptr;
        return gpucoll::intra::select_algorithm(call, 4, 4, config, 64 << 10, ring_links, &why);
    };
    const Machine pcie = load("pcie_4gpu.xml");
    const Machine nvs = load("dgx_h100.xml", "dgx_h100.nvlinks");
    const bool pcie_ring = choose_layout(pcie, {0, 1, 2, 3}).family == Family::RING;
    const bool nvs_ring = choose_layout(nvs, {0, 1, 2, 3}).family == Family::RING;
    EXPECT_TRUE(pcie_ring);
    EXPECT_FALSE(nvs_ring);
    const size_t large = 1 << 20, small = 16;
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, large, pcie_ring), GPUCOLL_ALGO_RING);
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, small, pcie_ring), GPUCOLL_ALGO_ONE_SHOT);
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLGATHER, large, pcie_ring), GPUCOLL_ALGO_RING);
    EXPECT_EQ(pick(GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, large, pcie_ring), GPUCOLL_ALGO_RING);
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, large, nvs_ring), GPUCOLL_ALGO_TWO_SHOT);
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, small, nvs_ring), GPUCOLL_ALGO_ONE_SHOT);
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLGATHER, large, nvs_ring), GPUCOLL_ALGO_DIRECT);
    EXPECT_EQ(pick(GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, large, nvs_ring), GPUCOLL_ALGO_DIRECT);
    // A forced algorithm still wins.
    config.algorithm[GPUCOLL_COLL_ALLREDUCE] = GPUCOLL_ALGO_TWO_SHOT;
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, large, pcie_ring), GPUCOLL_ALGO_TWO_SHOT);
}

TEST(TopoRails, NicNamesForUcx) {
    const Machine dgx = load("dgx_h100.xml", "dgx_h100.nvlinks");
    EXPECT_EQ(ucx_device_name(dgx.nics[3]), "mlx5_3:1");
    const Machine pcie = load("pcie_4gpu.xml");
    EXPECT_EQ(ucx_device_name(pcie.nics[0]), "eno1");
}

TEST(TopoRails, OnlyOnThisMachineAndUnlessTheUserChose) {
    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    std::string why;
    unsetenv("HWLOC_XMLFILE");
    unsetenv("UCX_NET_DEVICES");
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");  // one process: UCX keeps every NIC
    EXPECT_EQ(gpucoll::intra::rail_net_device(config, 0, "0000:18:00.0", &why), "");
    EXPECT_NE(why.find("one process"), std::string::npos) << why;
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    config.rails = 0;
    EXPECT_EQ(gpucoll::intra::rail_net_device(config, 0, "0000:18:00.0", &why), "");
    EXPECT_NE(why.find("rails off"), std::string::npos) << why;
    config.rails = 1;
    setenv("UCX_NET_DEVICES", "lo", 1);
    EXPECT_EQ(gpucoll::intra::rail_net_device(config, 0, "0000:18:00.0", &why), "");
    EXPECT_NE(why.find("UCX_NET_DEVICES"), std::string::npos);
    unsetenv("UCX_NET_DEVICES");
    EXPECT_EQ(gpucoll::intra::rail_net_device(config, 0, "", &why), "");  // emu
    EXPECT_NE(why.find("no PCI bus id"), std::string::npos);
    const std::string xml = fixture("dgx_h100.xml");
    config.topology_file = xml.c_str();  // a file describes another machine
    EXPECT_EQ(gpucoll::intra::rail_net_device(config, 0, "0000:18:00.0", &why), "");
    EXPECT_NE(why.find("file"), std::string::npos);
    config.topology_file = nullptr;
    Machine here;
    ASSERT_EQ(discover({}, &here), gpucoll::kSuccess);
    if (here.gpus.empty()) {  // this machine: the bus id is no GPU of it
        EXPECT_EQ(gpucoll::intra::rail_net_device(config, 0, "0000:18:00.0", &why), "");
        EXPECT_NE(why.find("not in the discovered topology"), std::string::npos) << why;
    }
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

// coll_gpucoll_rail_devices: the NIC of each GPU, given (containers where
// hwloc sees no PCI tree); it wins over every discovery rule, not over
// rails off.
TEST(TopoRails, GivenPerGpu) {
    using gpucoll::intra::rail_device_of;
    using gpucoll::intra::rail_net_device;
    EXPECT_EQ(rail_device_of("mlx5_0:1, mlx5_1:1", 0), "mlx5_0:1");
    EXPECT_EQ(rail_device_of("mlx5_0:1, mlx5_1:1", 1), "mlx5_1:1");
    EXPECT_EQ(rail_device_of("mlx5_0:1, mlx5_1:1", 7), "mlx5_1:1");  // modulo the list
    EXPECT_EQ(rail_device_of("a+b,c", 0), "a,b");                    // two NICs for GPU 0
    EXPECT_EQ(rail_device_of("a,,c", 1), "");                        // UCX chooses for GPU 1
    EXPECT_EQ(rail_device_of("a", -1), "");
    // By PCI bus id (per-rank CUDA_VISIBLE_DEVICES: every rank's GPU is 0)
    const std::string by_bus = "0000:18:00.0=mlx5_0:1, 0000:2A:00.0=mlx5_1:1+mlx5_2:1";
    EXPECT_EQ(rail_device_of(by_bus, 0, "0000:18:00.0"), "mlx5_0:1");
    EXPECT_EQ(rail_device_of(by_bus, 0, "0000:2a:00.0"), "mlx5_1:1,mlx5_2:1");  // any case
    EXPECT_EQ(rail_device_of(by_bus, 0, "0000:99:00.0"), "");  // not listed: UCX chooses
    EXPECT_EQ(rail_device_of(by_bus, 0, ""), "");              // no bus id
    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    EXPECT_EQ(config.rail_devices, nullptr);
    config.rail_devices = "lo,mlx5_1:1";
    std::string why;
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");  // one process: still the given NIC
    setenv("UCX_NET_DEVICES", "eth9", 1);    // the given list wins over the user's variable
    EXPECT_EQ(rail_net_device(config, 1, "", &why), "mlx5_1:1");  // no bus id (emu): given
    EXPECT_NE(why.find("GPU 1"), std::string::npos) << why;
    EXPECT_EQ(rail_net_device(config, -1, "", &why), "");  // no GPU chosen yet
    EXPECT_NE(why.find("no GPU"), std::string::npos) << why;
    config.rails = 0;
    EXPECT_EQ(rail_net_device(config, 0, "", &why), "");
    EXPECT_NE(why.find("rails off"), std::string::npos) << why;
    unsetenv("UCX_NET_DEVICES");
}

TEST(TopoRails, InactivePortsAreSkipped) {
    Machine m = load("dgx_h100.xml", "dgx_h100.nvlinks");
    m.nics[0].usable = false;  // hwloc reported its ports, none active
    m.nics[3].port = 2;
    const std::vector<NicChoice> c = nic_per_gpu(m);
    EXPECT_EQ(c[0].nic, 1);  // the other NIC of its switch
    EXPECT_EQ(c[0].path, Path::PIX);
    for (const NicChoice& x : c) EXPECT_NE(x.nic, 0);
    EXPECT_EQ(ucx_device_name(m.nics[3]), "mlx5_3:2");
}

// Rails pinned UCX (UCX_NET_DEVICES) to any NIC: on a machine with two
// equally close Ethernet ports (eno1, eno2) and no RDMA device, half the
// GPUs took eno2, maybe a management or dead port. Rails are RDMA devices
// with an active port only; otherwise UCX chooses.
TEST(TopoRails, NoRailOnPlainEthernet) {
    Machine m = load("pcie_4gpu.xml");
    ASSERT_EQ(m.nics.size(), 1u);
    Nic eno2 = m.nics[0];  // a second port beside eno1, as close to every GPU
    eno2.bus_id = "0000:4e:00.1";
    eno2.name = eno2.netdev = "eno2";
    m.nics.push_back(eno2);
    EXPECT_EQ(nic_path(m, 1, 0), nic_path(m, 1, 1));
    const std::vector<NicChoice> c = nic_per_gpu(m);
    for (int g = 0; g < 4; ++g) {
        const NicChoice& x = c[static_cast<size_t>(g)];
        EXPECT_EQ(x.nic, 0) << "GPU" << g;  // the closest for the report, not spread
        EXPECT_FALSE(x.rail) << "GPU" << g;
        EXPECT_FALSE(x.gpudirect);
        std::string why;
        EXPECT_EQ(rail_device(m, g, &why), "") << "GPU" << g;
        EXPECT_NE(why.find("no RDMA device with an active port"), std::string::npos) << why;
    }
    // An RDMA device whose ports are all down is no rail either, and not the
    // report's NIC.
    Nic ib = m.nics[0];
    ib.bus_id = "0000:4f:00.0";
    ib.name = "mlx5_0";
    ib.rdma = true;
    ib.usable = false;
    m.nics.push_back(ib);
    for (const NicChoice& x : nic_per_gpu(m)) {
        EXPECT_FALSE(x.rail);
        EXPECT_NE(x.nic, 2);
    }
    m.nics[2].usable = true;  // its port comes up: every GPU's rail, however far
    for (int g = 0; g < 4; ++g) {
        EXPECT_TRUE(nic_per_gpu(m)[static_cast<size_t>(g)].rail);
        std::string why;
        EXPECT_EQ(rail_device(m, g, &why), "mlx5_0:1") << why;
    }
}

// As hwloc reports them: a port not ACTIVE, or no port state at all, is no
// rail (the XML of the two-socket machine, its ConnectX-6 port edited).
TEST(TopoRails, OnlyActivePortsAreRails) {
    const Machine ok = load("two_socket.xml");
    ASSERT_EQ(ok.nics.size(), 1u);
    EXPECT_TRUE(ok.nics[0].rdma && ok.nics[0].usable);
    EXPECT_TRUE(nic_per_gpu(ok)[0].rail);
    std::string why;
    EXPECT_EQ(rail_device(ok, 0, &why), "mlx5_0:1") << why;
    std::ifstream in(fixture("two_socket.xml"));
    const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string active = "<info name=\"Port1State\" value=\"4\"/>";
    ASSERT_NE(xml.find(active), std::string::npos);
    for (const char* edit : {"<info name=\"Port1State\" value=\"1\"/>", ""}) {  // DOWN; none
        std::string variant = xml;
        variant.replace(variant.find(active), active.size(), edit);
        const std::string file = write_temp(variant);
        Sources s;
        s.xml_file = file;
        Machine m;
        ASSERT_EQ(discover(s, &m), gpucoll::kSuccess) << gpucoll::last_error();
        ASSERT_EQ(m.nics.size(), 1u);
        EXPECT_TRUE(m.nics[0].rdma);
        EXPECT_FALSE(m.nics[0].usable) << '"' << edit << '"';
        for (int g = 0; g < 4; ++g) {
            EXPECT_FALSE(nic_per_gpu(m)[static_cast<size_t>(g)].rail);
            EXPECT_EQ(rail_device(m, g, &why), "");
        }
        std::remove(file.c_str());
    }
}

TEST(TopoPaths, UnknownNumaIsNotTheFirstNode) {
    Machine m;
    m.bridges = {Bridge{true, "", 0}, Bridge{true, "", 1}};
    PciDevice a, b;
    a.bus_id = "0000:01:00.0";
    b.bus_id = "0000:81:00.0";
    a.bridges = {0};
    b.bridges = {1};
    EXPECT_EQ(pci_path(a, b, m), Path::SYS);  // nothing known: across the machine
    a.package = b.package = 0;
    EXPECT_EQ(pci_path(a, b, m), Path::NODE);  // one package, NUMA unknown
    a.numa = 0;
    b.numa = 1;
    EXPECT_EQ(pci_path(a, b, m), Path::SYS);
}

TEST(TopoNodeLayout, FingerprintIsWhatTheLayoutUses) {
    const Machine m = load("pcie_4gpu.xml");
    Machine other = m;
    other.gpus[1].cpuset = "0-3";  // another cgroup's view
    other.nics.clear();
    EXPECT_EQ(gpucoll::intra::machine_fingerprint(m), gpucoll::intra::machine_fingerprint(other));
    other.links.assign(other.gpus.size(), GpuLinks{});
    other.links[0].to_gpu[1] = other.links[1].to_gpu[0] = 4;  // another machine
    EXPECT_NE(gpucoll::intra::machine_fingerprint(m), gpucoll::intra::machine_fingerprint(other));
}

// ---------------------------------------------------------------------------
// The cost model's selection table
// ---------------------------------------------------------------------------

TEST(TopoModelTable, PicksPerPresetAndRespectsOneShotsScratch) {
    std::string error;
    const ModelParams* pcie = load_model("pcie4-workstation", "cuda", &error);
    const ModelParams* h100 = load_model("h100-nvswitch", "cuda", &error);
    ASSERT_NE(pcie, nullptr) << error;
    ASSERT_NE(h100, nullptr) << error;
    EXPECT_EQ(load_model("h100-nvswitch", "cuda", &error), h100);  // once per process
    ModelTable t;
    EXPECT_TRUE(t.empty());
    EXPECT_EQ(t.lookup(GPUCOLL_COLL_ALLREDUCE, 1 << 20), GPUCOLL_ALGO_AUTO);
    const size_t slot = 256 << 10;
    t.build(*pcie, 4, slot);
    // The same answers as the model's own ranking, where the table has them.
    for (size_t bytes : {size_t{64} << 10, size_t{64} << 20}) {
        const auto ranked = rank_algorithms(GPUCOLL_COLL_ALLREDUCE, bytes, Shape{4, 1}, *pcie);
        ASSERT_FALSE(ranked.empty());
        EXPECT_EQ(t.lookup(GPUCOLL_COLL_ALLREDUCE, bytes), ranked[0].algo) << bytes;
    }
    EXPECT_EQ(t.lookup(GPUCOLL_COLL_ALLREDUCE, 64 << 20), GPUCOLL_ALGO_RING);
    // One-shot never beyond its scratch slot, whatever the model says.
    for (size_t bytes = slot * 2; bytes <= (size_t{1} << 30); bytes *= 2)
        EXPECT_NE(t.lookup(GPUCOLL_COLL_ALLREDUCE, bytes), GPUCOLL_ALGO_ONE_SHOT) << bytes;
    // Classes are powers of two: a call of 2^k + 1 bytes is looked up at 2^(k+1).
    EXPECT_EQ(t.lookup(GPUCOLL_COLL_ALLREDUCE, (64 << 20) + 1),
              t.lookup(GPUCOLL_COLL_ALLREDUCE, 128 << 20));
    ModelTable n;
    n.build(*h100, 8, slot);
    EXPECT_EQ(n.lookup(GPUCOLL_COLL_ALLREDUCE, 8), GPUCOLL_ALGO_ONE_SHOT);
    EXPECT_NE(n.summary().find("allreduce: one_shot to "), std::string::npos) << n.summary();
    EXPECT_NE(model_fingerprint(*pcie), model_fingerprint(*h100));
}

// Predictions that are not finite (parameters set without the parser) are
// ranked last; the table takes none of them: where nothing is finite it
// keeps the size thresholds (auto).
TEST(TopoModelTable, NonFinitePredictionsAreNotPicked) {
    ModelParams none;
    ASSERT_TRUE(preset("pcie4-workstation", &none));
    none.sync_us = none.d2h.latency_us = std::nan("");  // every algorithm, staged too
    ModelTable t;
    t.build(none, 4, 256 << 10);
    for (int c = 0; c < GPUCOLL_COLL_REDUCE_LOCAL; ++c)
        EXPECT_EQ(t.lookup(static_cast<gpucoll_coll_t>(c), 1 << 20), GPUCOLL_ALGO_AUTO) << c;
    ModelParams half;
    ASSERT_TRUE(preset("pcie4-workstation", &half));
    half.d2h.latency_us = std::nan("");  // staged only
    t.build(half, 4, 256 << 10);
    EXPECT_EQ(t.lookup(GPUCOLL_COLL_ALLREDUCE, 8), GPUCOLL_ALGO_ONE_SHOT);
    EXPECT_NE(t.lookup(GPUCOLL_COLL_ALLGATHER, 8), GPUCOLL_ALGO_STAGED);
}

TEST(TopoModelTable, UnknownModelIsAnError) {
    std::string error;
    EXPECT_EQ(load_model("no-such-model", "emu", &error), nullptr);
    EXPECT_NE(error.find("neither a preset"), std::string::npos) << error;
}

// One reading of coll_gpucoll_cost_model for the component and for
// gpucoll_topo --model: a partial params file refines the backend's preset
// (the tool used to fill it from h100-nvswitch, the component from emu).
TEST(TopoModelTable, AParamsFileRefinesTheBackendsPreset) {
    const std::string file = write_temp("# partial\nsync_us = 9\npeer.bandwidth_GBps = 3\n");
    for (const char* backend : {"emu", "cuda"}) {
        EXPECT_EQ(base_preset(backend), std::string(backend) == "emu" ? "emu" : "h100-nvswitch");
        ModelParams want;
        ASSERT_TRUE(preset(base_preset(backend), &want));
        want.sync_us = 9;
        want.peer.bandwidth_GBps = 3;
        ModelParams got;
        std::string error;
        ASSERT_TRUE(resolve_model(file, backend, &got, &error)) << error;
        EXPECT_EQ(format_params(got), format_params(want)) << backend;
        const ModelParams* loaded = load_model(file, backend, &error);
        ASSERT_NE(loaded, nullptr) << error;
        EXPECT_EQ(model_fingerprint(*loaded), model_fingerprint(want)) << backend;
        // A preset is itself on every backend.
        ASSERT_TRUE(resolve_model("pcie4-workstation", backend, &got, &error));
        EXPECT_EQ(got.name, "pcie4-workstation");
    }
    std::string error;
    EXPECT_NE(load_model(file, "emu", &error), load_model(file, "cuda", &error));
    ModelParams untouched;
    EXPECT_FALSE(resolve_model("/nonexistent.params", "emu", &untouched, &error));
    EXPECT_NE(error.find("neither a preset (h100-nvswitch, pcie4-workstation, emu)"),
              std::string::npos)
        << error;
    std::remove(file.c_str());
}

// The one-shot limit and slot, decided in one place for the node
// communicator and gpucoll_topo's table (which assumed cuda's 256 KiB).
TEST(TopoModelTable, OneShotSlotPerBackend) {
    using gpucoll::intra::one_shot_max_bytes;
    using gpucoll::intra::one_shot_slot_bytes;
    EXPECT_EQ(one_shot_max_bytes("emu", 0), size_t{16} << 10);
    EXPECT_EQ(one_shot_max_bytes("cuda", 0), size_t{256} << 10);
    EXPECT_EQ(one_shot_max_bytes("emu", 1000), 1000u);  // coll_gpucoll_allreduce_one_shot_max
    EXPECT_EQ(one_shot_max_bytes("cuda", SIZE_MAX),
              gpucoll::intra::kOneShotMaxCap);  // no wrapping scratch size
    EXPECT_EQ(one_shot_slot_bytes(1000), 1024u);
    EXPECT_EQ(one_shot_slot_bytes(16 << 10), size_t{16} << 10);
    // The slot bounds the table: emu's 16 KiB, not 256 KiB.
    ModelParams slow;
    ASSERT_TRUE(preset("emu", &slow));
    slow.sync_us = 20;  // one-shot (one handshake) wins to 64K, staging loses
    slow.d2h.latency_us = slow.h2d.latency_us = 200;
    ModelTable t;
    t.build(slow, 4, one_shot_slot_bytes(one_shot_max_bytes("emu", 0)));
    EXPECT_EQ(t.lookup(GPUCOLL_COLL_ALLREDUCE, 16 << 10), GPUCOLL_ALGO_ONE_SHOT);
    EXPECT_EQ(t.lookup(GPUCOLL_COLL_ALLREDUCE, 32 << 10), GPUCOLL_ALGO_TWO_SHOT);
    t.build(slow, 4, one_shot_slot_bytes(one_shot_max_bytes("emu", 64 << 10)));
    EXPECT_EQ(t.lookup(GPUCOLL_COLL_ALLREDUCE, 64 << 10), GPUCOLL_ALGO_ONE_SHOT);
}

TEST(TopoModelTable, SelectionAsksTheTableUnlessForced) {
    std::string error;
    const ModelParams* pcie = load_model("pcie4-workstation", "cuda", &error);
    ASSERT_NE(pcie, nullptr);
    ModelTable t;
    t.build(*pcie, 4, 16 << 10);
    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    config.one_shot_max_bytes = 16 << 10;
    gpucoll_call_t call{};
    call.coll = GPUCOLL_COLL_ALLREDUCE;
    call.count = 16 << 20;  // 64 MiB of floats
    call.dtype = GPUCOLL_FLOAT;
    const char* why = nullptr;
    EXPECT_EQ(gpucoll::intra::select_algorithm(call, 4, 4, config, 16 << 10, false, &why, &t),
              GPUCOLL_ALGO_RING);
    EXPECT_NE(std::string(why).find("cost model"), std::string::npos);
    EXPECT_EQ(gpucoll::intra::select_algorithm(call, 4, 4, config, 16 << 10, false, &why, nullptr),
              GPUCOLL_ALGO_TWO_SHOT);
    config.algorithm[GPUCOLL_COLL_ALLREDUCE] = GPUCOLL_ALGO_TWO_SHOT;
    EXPECT_EQ(gpucoll::intra::select_algorithm(call, 4, 4, config, 16 << 10, false, &why, &t),
              GPUCOLL_ALGO_TWO_SHOT);
}

#!/usr/bin/env python3
"""Generate the hwloc XML topology fixtures used by the topology tests.

Usage:
    python3 make_fixtures.py            # (re)write the fixtures next to this script
    python3 make_fixtures.py -o DIR     # write them into DIR instead
    python3 make_fixtures.py --check    # exit 1 if a fixture on disk differs

Python 3 standard library only; the output is deterministic (same input, same
bytes), and the generated files are committed.  Edit the machine descriptions
below and rerun the script; never edit the generated files by hand.

What is written (see README.md for what each machine models and the expected
GPU/NIC matrices):

    dgx_h100.xml, dgx_h100.nvlinks      8 x H100 SXM + 8 x ConnectX-7, NVSwitch
    pcie_4gpu.xml                       4 x L40S behind 2 PCIe switches, 1 NIC
    two_socket.xml, two_socket.nvlinks  4 x A100 PCIe, NVLink bridges in pairs

How a machine is described:

    Machine                 a list of Packages
      Package               cores (1 PU each), CPU model, NUMA memory, host bridges
        HostBridge          root bus number; a list of RootPorts
          RootPort          device.function on the root bus, secondary bus, and
                            one child: an endpoint (Gpu / Nic) or a Switch
            Switch          an upstream port bridge on the root port's secondary
                            bus, its internal bus, and DownstreamPorts (each with
                            a device number on the internal bus and one endpoint)
              Gpu / Nic     the endpoint's own bus (function 00.0); the bridge
                            directly above it gets it as its secondary bus.

Every bridge's subordinate bus is computed as the highest bus below it, so
the bridge_pci ranges always contain everything underneath.  The script checks
that: bus ids are unique, a bridge's children all sit on its secondary bus,
sibling ranges do not overlap, GPU/NIC indices are 0..n-1 and GPU bus ids are
in ascending order of index.  hwloc's bridge "depth" attribute is written as
hwloc computes it (host bridge 0, root port 1, switch upstream port 2,
downstream port 3); hwloc recomputes it on load anyway.

XML conventions (hwloc v2 format, as written by hwloc 2.9's exporter):
  * attribute order type, os_index, cpusets, nodesets, gp_index, name,
    subtype, type-specific attributes; <info> children after the attributes;
  * children of a normal object: memory (NUMANode) first, then normal
    (Core/PU), then I/O (Bridge) -- I/O objects hang off the Package;
  * gp_index numbered 1, 2, ... in document order (unique);
  * no caches, no XML comments (hwloc's built-in non-libxml parser does not
    accept comments), no <support> elements.

NVLink files (*.nvlinks), parsed by gpucoll itself, one statement per line:
    nvlink <gpu-pci-bus-id> <peer> <links>
where peer is another GPU's bus id or the word "nvswitch".  A GPU-to-GPU
connection is stated once (from the lower bus id), not once per direction.
"""

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import List, Optional, Tuple, Union
from xml.sax.saxutils import quoteattr

# --------------------------------------------------------------------------
# PCI identities ("CLASS [vendor:device] [subvendor:subdevice] rev") and
# link speeds (GB/s, as hwloc computes them: lanes * GT/s * encoding / 8).

GEN4_X8 = 15.753846
GEN4_X16 = 31.507692
GEN5_X16 = 63.015385

H100_SXM = "0302 [10de:2330] [10de:16c1] a1"
L40S = "0302 [10de:26b9] [10de:1851] a1"
A100_PCIE = "0302 [10de:20b5] [10de:1533] a1"
CX7_IB = "0207 [15b3:1021] [15b3:0041] 00"
CX6_IB = "0207 [15b3:101b] [15b3:0006] 00"
E810_ETH = "0200 [8086:159b] [8086:0003] 02"

SPR_ROOT_PORT = "0604 [8086:352a] [0000:0000] 04"   # Sapphire Rapids
ICX_ROOT_PORT = "0604 [8086:347a] [0000:0000] 04"   # Ice Lake-SP
WRX80_ROOT_PORT = "0604 [1022:1483] [0000:0000] 00"  # AMD Threadripper PRO
PEX89000_PORT = "0604 [1000:c030] [0000:0000] b0"   # Broadcom PCIe Gen5 switch
PEX88000_PORT = "0604 [1000:c010] [0000:0000] b0"   # Broadcom PCIe Gen4 switch

OSDEV_BLOCK, OSDEV_GPU, OSDEV_NETWORK, OSDEV_OPENFABRICS, OSDEV_DMA, OSDEV_COPROC = range(6)


# --------------------------------------------------------------------------
# Machine description data model.

@dataclass
class Gpu:
    index: int          # CUDA index -> OSDev "cuda<index>"
    bus: int            # the GPU is at 0000:<bus>:00.0
    pci_type: str
    model: str          # GPUModel info of the CUDA OSDev
    speed: float


@dataclass
class Nic:
    index: int          # NIC index (README's NIC<index>)
    bus: int            # the NIC is at 0000:<bus>:00.0
    pci_type: str
    speed: float
    # OSDevs: (name, osdev_type, subtype or None, [(info name, value), ...])
    osdevs: List[Tuple[str, int, Optional[str], List[Tuple[str, str]]]]


Endpoint = Union[Gpu, Nic]


@dataclass
class DownstreamPort:
    dev: int            # device number on the switch's internal bus (function 0)
    child: Endpoint


@dataclass
class Switch:
    internal_bus: int   # the upstream port's secondary bus (the downstream ports sit on it)
    ports: List[DownstreamPort]
    pci_type: str
    speed: float


@dataclass
class RootPort:
    devfn: Tuple[int, int]  # (device, function) on the host bridge's root bus
    secondary: int          # the bus its child (switch upstream port or endpoint) sits on
    child: Union[Switch, Endpoint]
    pci_type: str
    speed: float


@dataclass
class HostBridge:
    root_bus: int           # the bus the root ports sit on
    root_ports: List[RootPort]


@dataclass
class Package:
    cores: int
    cpu_model: str
    memory: int             # NUMA node local_memory, bytes
    host_bridges: List[HostBridge]


@dataclass
class Machine:
    name: str
    packages: List[Package]
    # NVLink statements: (gpu index, peer gpu index or "nvswitch", links)
    nvlinks: List[Tuple[int, Union[int, str], int]] = field(default_factory=list)


# --------------------------------------------------------------------------
# Helpers to build the descriptions.

def busid(bus: int, dev: int = 0, fn: int = 0) -> str:
    return "0000:%02x:%02x.%x" % (bus, dev, fn)


def cx7(index: int, bus: int) -> Nic:
    guid = "a088:c203:00%02x:%04x" % (0x40 + index, 0x1000 + bus)
    return Nic(index, bus, CX7_IB, GEN5_X16, [
        ("mlx5_%d" % index, OSDEV_OPENFABRICS, "OpenFabrics",
         [("NodeGUID", guid), ("SysImageGUID", guid), ("Port1State", "4"),
          ("Port1LID", "0x%x" % (0x10 + index)), ("Port1LMC", "0")]),
        # systemd's predictable name: bus number in decimal
        ("ibp%ds0" % bus, OSDEV_NETWORK, None,
         [("Address", "00:00:10:29:fe:80:00:00:00:00:00:00:" + ":".join(
             guid.replace(":", "")[i:i + 2] for i in range(0, 16, 2))),
          ("Port", "1")]),
    ])


def h100(index: int, bus: int) -> Gpu:
    return Gpu(index, bus, H100_SXM, "NVIDIA H100 80GB HBM3", GEN5_X16)


def dgx_switch(internal_bus: int, gpu0: Gpu, nic0: Nic, gpu1: Gpu, nic1: Nic) -> Switch:
    return Switch(internal_bus, [DownstreamPort(0, gpu0), DownstreamPort(1, nic0),
                                 DownstreamPort(2, gpu1), DownstreamPort(3, nic1)],
                  PEX89000_PORT, GEN5_X16)


def dgx_host_bridge(root_bus: int, s: int, gpu_bus: Tuple[int, int],
                    nic_bus: Tuple[int, int]) -> HostBridge:
    """Host bridge -> root port -> PCIe switch s with GPUs 2s, 2s+1 and NICs 2s, 2s+1."""
    sw = dgx_switch(root_bus + 2,
                    h100(2 * s, gpu_bus[0]), cx7(2 * s, nic_bus[0]),
                    h100(2 * s + 1, gpu_bus[1]), cx7(2 * s + 1, nic_bus[1]))
    return HostBridge(root_bus, [RootPort((1, 0), root_bus + 1, sw, SPR_ROOT_PORT, GEN5_X16)])


# --------------------------------------------------------------------------
# The machines.

DGX_H100 = Machine("dgx_h100", [
    Package(8, "Intel(R) Xeon(R) Platinum 8480C", 1 << 40, [
        dgx_host_bridge(0x10, 0, (0x18, 0x2a), (0x19, 0x2b)),
        dgx_host_bridge(0x30, 1, (0x3a, 0x5d), (0x3b, 0x5e)),
    ]),
    Package(8, "Intel(R) Xeon(R) Platinum 8480C", 1 << 40, [
        dgx_host_bridge(0x90, 2, (0x9a, 0xab), (0x9b, 0xac)),
        dgx_host_bridge(0xb0, 3, (0xba, 0xdb), (0xbb, 0xdc)),
    ]),
], nvlinks=[(g, "nvswitch", 18) for g in range(8)])


def l40s(index: int, bus: int) -> Gpu:
    return Gpu(index, bus, L40S, "NVIDIA L40S", GEN4_X16)


def pex88000(internal_bus: int, gpus: List[Gpu]) -> Switch:
    return Switch(internal_bus, [DownstreamPort(i, g) for i, g in enumerate(gpus)],
                  PEX88000_PORT, GEN4_X16)


PCIE_4GPU = Machine("pcie_4gpu", [
    Package(16, "AMD Ryzen Threadripper PRO 5955WX 16-Cores", 256 << 30, [
        HostBridge(0x00, [
            RootPort((1, 1), 0x01, pex88000(0x02, [l40s(0, 0x03), l40s(1, 0x04)]),
                     WRX80_ROOT_PORT, GEN4_X16),
            RootPort((3, 1), 0x2a, pex88000(0x2b, [l40s(2, 0x2c), l40s(3, 0x2d)]),
                     WRX80_ROOT_PORT, GEN4_X16),
            RootPort((7, 1), 0x4e,
                     Nic(0, 0x4e, E810_ETH, GEN4_X8,
                         [("eno1", OSDEV_NETWORK, None,
                           [("Address", "b4:96:91:a5:4e:00")])]),
                     WRX80_ROOT_PORT, GEN4_X8),
        ]),
    ]),
])


def a100(index: int, bus: int) -> Gpu:
    return Gpu(index, bus, A100_PCIE, "NVIDIA A100 80GB PCIe", GEN4_X16)


def icx_root_port(dev: int, child: Endpoint) -> RootPort:
    return RootPort((dev, 0), child.bus, child, ICX_ROOT_PORT, GEN4_X16)


CX6_GUID = "b859:9f03:00d4:1a2c"

TWO_SOCKET = Machine("two_socket", [
    Package(8, "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 256 << 30, [
        HostBridge(0x16, [
            icx_root_port(2, a100(0, 0x17)),
            icx_root_port(3, a100(1, 0x31)),
            icx_root_port(4, Nic(0, 0x4b, CX6_IB, GEN4_X16, [
                ("mlx5_0", OSDEV_OPENFABRICS, "OpenFabrics",
                 [("NodeGUID", CX6_GUID), ("SysImageGUID", CX6_GUID),
                  ("Port1State", "4"), ("Port1LID", "0x1"), ("Port1LMC", "0")]),
                ("ib0", OSDEV_NETWORK, None,
                 [("Address", "00:00:10:29:fe:80:00:00:00:00:00:00:b8:59:9f:03:00:d4:1a:2c"),
                  ("Port", "1")]),
            ])),
        ]),
    ]),
    Package(8, "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 256 << 30, [
        HostBridge(0xb0, [
            icx_root_port(2, a100(2, 0xb1)),
            icx_root_port(3, a100(3, 0xca)),
            # the third root port has nothing behind it: omitted
        ]),
    ]),
], nvlinks=[(0, 1, 12), (2, 3, 12)])

MACHINES = [DGX_H100, PCIE_4GPU, TWO_SOCKET]


# --------------------------------------------------------------------------
# Bus-range computation and consistency checks.

class FixtureError(Exception):
    pass


def max_bus(node) -> int:
    """Highest bus number at or below node (a Switch, RootPort or endpoint)."""
    if isinstance(node, (Gpu, Nic)):
        return node.bus
    if isinstance(node, Switch):
        return max([node.internal_bus] + [p.child.bus for p in node.ports])
    if isinstance(node, RootPort):
        return max(node.secondary, max_bus(node.child))
    raise TypeError(node)


def check_machine(m: Machine) -> None:
    seen = {}

    def claim(bid: str, what: str) -> None:
        if bid in seen:
            raise FixtureError("%s: bus id %s used by %s and %s" % (m.name, bid, seen[bid], what))
        seen[bid] = what

    def check_disjoint(ranges, where):
        ranges = sorted(ranges)
        for (a0, a1), (b0, b1) in zip(ranges, ranges[1:]):
            if b0 <= a1:
                raise FixtureError("%s: overlapping bus ranges under %s" % (m.name, where))

    hb_ranges = []
    for p in m.packages:
        for hb in p.host_bridges:
            top = max([hb.root_bus] + [max_bus(rp) for rp in hb.root_ports])
            hb_ranges.append((hb.root_bus, top))
            rp_ranges = []
            for rp in hb.root_ports:
                where = "root port %s" % busid(hb.root_bus, *rp.devfn)
                claim(busid(hb.root_bus, *rp.devfn), where)
                if rp.secondary <= hb.root_bus:
                    raise FixtureError("%s: %s secondary bus not above its own" % (m.name, where))
                rp_ranges.append((rp.secondary, max_bus(rp)))
                c = rp.child
                if isinstance(c, Switch):
                    claim(busid(rp.secondary), "switch upstream port")
                    if c.internal_bus <= rp.secondary:
                        raise FixtureError("%s: switch under %s: bad internal bus" % (m.name, where))
                    for dp in c.ports:
                        claim(busid(c.internal_bus, dp.dev), "switch downstream port")
                        if dp.child.bus <= c.internal_bus:
                            raise FixtureError("%s: endpoint %s below its switch's bus"
                                               % (m.name, busid(dp.child.bus)))
                        claim(busid(dp.child.bus), "endpoint")
                    check_disjoint([(dp.child.bus, dp.child.bus) for dp in c.ports], where)
                else:
                    if c.bus != rp.secondary:
                        raise FixtureError("%s: endpoint under %s not on its secondary bus"
                                           % (m.name, where))
                    claim(busid(c.bus), "endpoint")
            check_disjoint(rp_ranges, "host bridge %02x" % hb.root_bus)
    check_disjoint(hb_ranges, "the machine")

    gpus = sorted(endpoints(m, Gpu), key=lambda g: g.index)
    nics = sorted(endpoints(m, Nic), key=lambda n: n.index)
    for kind, devs in (("GPU", gpus), ("NIC", nics)):
        if [d.index for d in devs] != list(range(len(devs))):
            raise FixtureError("%s: %s indices are not 0..n-1" % (m.name, kind))
    if [g.bus for g in gpus] != sorted(g.bus for g in gpus):
        raise FixtureError("%s: GPU bus ids not ascending with the GPU index" % m.name)
    for g, peer, links in m.nvlinks:
        if g >= len(gpus) or (peer != "nvswitch" and (peer >= len(gpus) or peer == g)):
            raise FixtureError("%s: bad nvlink statement %r" % (m.name, (g, peer, links)))


def endpoints(m: Machine, kind):
    out = []
    for p in m.packages:
        for hb in p.host_bridges:
            for rp in hb.root_ports:
                kids = [dp.child for dp in rp.child.ports] if isinstance(rp.child, Switch) \
                    else [rp.child]
                out.extend(k for k in kids if isinstance(k, kind))
    return out


# --------------------------------------------------------------------------
# XML emission.

def bitmap(bits) -> str:
    """hwloc bitmap string: 32-bit words, most significant first, "0x%08x", comma separated."""
    value = 0
    for b in bits:
        value |= 1 << b
    words = []
    while True:
        words.append(value & 0xffffffff)
        value >>= 32
        if not value:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 0

    def next_gp(self) -> int:
        self.gp += 1
        return self.gp

    def open(self, depth: int, attrs, infos=(), leaf=False) -> None:
        text = "  " * depth + "<object " + " ".join(
            "%s=%s" % (k, quoteattr(str(v))) for k, v in attrs)
        if leaf and not infos:
            self.lines.append(text + "/>")
            return
        self.lines.append(text + ">")
        for name, value in infos:
            self.lines.append("  " * (depth + 1) + "<info name=%s value=%s/>"
                              % (quoteattr(name), quoteattr(value)))
        if leaf:
            self.close(depth)

    def close(self, depth: int) -> None:
        self.lines.append("  " * depth + "</object>")


def sets(cpus, nodes, root=False):
    c, n = bitmap(cpus), bitmap(nodes)
    out = [("cpuset", c), ("complete_cpuset", c)]
    if root:
        out.append(("allowed_cpuset", c))
    out += [("nodeset", n), ("complete_nodeset", n)]
    if root:
        out.append(("allowed_nodeset", n))
    return out


def pci_attrs(bid: str, pci_type: str, speed: float):
    return [("pci_busid", bid), ("pci_type", pci_type), ("pci_link_speed", "%f" % speed)]


def emit_endpoint(w: Writer, depth: int, e: Endpoint) -> None:
    w.open(depth, [("type", "PCIDev"), ("gp_index", w.next_gp())]
           + pci_attrs(busid(e.bus), e.pci_type, e.speed))
    if isinstance(e, Gpu):
        osdevs = [("cuda%d" % e.index, OSDEV_COPROC, "CUDA",
                   [("Backend", "CUDA"), ("GPUVendor", "NVIDIA Corporation"),
                    ("GPUModel", e.model)])]
    else:
        osdevs = e.osdevs
    for name, otype, subtype, infos in osdevs:
        attrs = [("type", "OSDev"), ("gp_index", w.next_gp()), ("name", name)]
        if subtype:
            attrs.append(("subtype", subtype))
        attrs.append(("osdev_type", otype))
        w.open(depth + 1, attrs, infos, leaf=True)
    w.close(depth)


def emit_bridge_open(w: Writer, depth: int, bdepth: int, sec: int, sub: int,
                     bid: str, pci_type: str, speed: float) -> None:
    w.open(depth, [("type", "Bridge"), ("gp_index", w.next_gp()),
                   ("bridge_type", "1-1"), ("depth", bdepth),
                   ("bridge_pci", "0000:[%02x-%02x]" % (sec, sub))]
           + pci_attrs(bid, pci_type, speed))


def emit_host_bridge(w: Writer, depth: int, hb: HostBridge) -> None:
    top = max([hb.root_bus] + [max_bus(rp) for rp in hb.root_ports])
    w.open(depth, [("type", "Bridge"), ("gp_index", w.next_gp()), ("bridge_type", "0-1"),
                   ("depth", 0), ("bridge_pci", "0000:[%02x-%02x]" % (hb.root_bus, top))])
    for rp in hb.root_ports:
        d = depth + 1
        emit_bridge_open(w, d, 1, rp.secondary, max_bus(rp),
                         busid(hb.root_bus, *rp.devfn), rp.pci_type, rp.speed)
        c = rp.child
        if isinstance(c, Switch):
            emit_bridge_open(w, d + 1, 2, c.internal_bus, max_bus(c),
                             busid(rp.secondary), c.pci_type, c.speed)
            for dp in c.ports:
                emit_bridge_open(w, d + 2, 3, dp.child.bus, dp.child.bus,
                                 busid(c.internal_bus, dp.dev), c.pci_type, c.speed)
                emit_endpoint(w, d + 3, dp.child)
                w.close(d + 2)
            w.close(d + 1)
        else:
            emit_endpoint(w, d + 1, c)
        w.close(d)
    w.close(depth)


def machine_xml(m: Machine) -> str:
    check_machine(m)
    w = Writer()
    ncpus = sum(p.cores for p in m.packages)
    w.open(1, [("type", "Machine"), ("os_index", 0)]
           + sets(range(ncpus), range(len(m.packages)), root=True)
           + [("gp_index", w.next_gp())],
           [("Architecture", "x86_64"), ("GpucollFixture", m.name)])
    first = 0
    for pi, p in enumerate(m.packages):
        cpus = range(first, first + p.cores)
        w.open(2, [("type", "Package"), ("os_index", pi)] + sets(cpus, [pi])
               + [("gp_index", w.next_gp())], [("CPUModel", p.cpu_model)])
        w.open(3, [("type", "NUMANode"), ("os_index", pi)] + sets(cpus, [pi])
               + [("gp_index", w.next_gp()), ("local_memory", p.memory)], leaf=True)
        for core, cpu in enumerate(cpus):
            w.open(3, [("type", "Core"), ("os_index", core)] + sets([cpu], [pi])
                   + [("gp_index", w.next_gp())])
            w.open(4, [("type", "PU"), ("os_index", cpu)] + sets([cpu], [pi])
                   + [("gp_index", w.next_gp())], leaf=True)
            w.close(3)
        for hb in p.host_bridges:
            emit_host_bridge(w, 3, hb)
        w.close(2)
        first += p.cores
    w.close(1)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n'
            '<topology version="2.0">\n'
            + "\n".join(w.lines) + "\n</topology>\n")


def nvlinks_text(m: Machine) -> str:
    gpus = {g.index: g for g in endpoints(m, Gpu)}
    out = ["# %s.nvlinks -- generated by make_fixtures.py, do not edit." % m.name,
           "# nvlink <gpu-pci-bus-id> <peer> <links>",
           "#   peer: another GPU's PCI bus id, or the word \"nvswitch\"",
           "# A GPU-to-GPU connection is stated once, not once per direction.",
           "# GPUs: " + ", ".join("GPU%d=%s" % (i, busid(gpus[i].bus)) for i in sorted(gpus)),
           ""]
    for g, peer, links in m.nvlinks:
        p = peer if peer == "nvswitch" else busid(gpus[peer].bus)
        out.append("nvlink %s %s %d" % (busid(gpus[g].bus), p, links))
    return "\n".join(out) + "\n"


def outputs():
    files = {}
    for m in MACHINES:
        files[m.name + ".xml"] = machine_xml(m)
        if m.nvlinks:
            files[m.name + ".nvlinks"] = nvlinks_text(m)
    return files


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--outdir", default=here, help="output directory (default: %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a file on disk differs from what would be written")
    args = ap.parse_args()
    try:
        files = outputs()
    except FixtureError as e:
        print("make_fixtures.py: %s" % e, file=sys.stderr)
        return 2
    stale = []
    for name, text in sorted(files.items()):
        path = os.path.join(args.outdir, name)
        if args.check:
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    if f.read() != text:
                        stale.append(name)
            except FileNotFoundError:
                stale.append(name)
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            print("wrote %s" % path)
    if stale:
        print("make_fixtures.py: out of date: %s (rerun make_fixtures.py)" % " ".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

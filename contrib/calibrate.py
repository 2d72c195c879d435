#!/usr/bin/env python3
"""contrib/calibrate.py - calibrates gpucoll's cost model (docs/cost-model.md) on
this machine and writes a params file for `gpucoll_topo --model FILE` and
`--mca coll_gpucoll_cost_model FILE`.

It measures primitives, not the collectives the model is checked against
(contrib/model-check.py does that):

  device copy and reduction  perf/gpucoll_kernel_bench at 14 sizes, as many
                             processes at once as the node has cores (emu:
                             every core busy, as when the ranks of a node
                             work); fits device_copy.* and device_reduce.*
                             (rate in cache, beyond it, fixed cost from the
                             64-byte time); cache_bytes is the CPUs' last-
                             level cache (sysfs; --cache-bytes fit fits it)
  staging copies             emu: the same memcpy as device copies (d2h, h2d =
                             device copy, in bytes copied: traffic / 2);
                             cuda: no micro-benchmark, kept from the preset
  shared writes (emu)        one Python process per core writes a shared-
                             memory buffer the next one read the round before
                             (ctypes memmove), against a private buffer:
                             shared_write_GBps
  cross-core copies (emu)    the same processes: each writes its own shared
                             buffer, then copies the next one's (what a rank
                             does reading its peer) at 2-32 MiB; the cache
                             size that fits their rates, at most cache_bytes:
                             peer_cache_bytes (0 when it is cache_bytes)
  host algorithm             perf/gpucoll_bench on host buffers with the
                             component off (Open MPI's own collectives, what
                             the staged path runs), np 2 (emu: to twice the
                             cores, at most 8): host.<coll>.* per collective
                             at np 2, host.np<L>.<coll>.* at L = 3..8 (Open
                             MPI's algorithm changes with the rank count),
                             host.np<L>.<coll>.table_us at L = 2..8 (the
                             medians, size by size: it changes with the
                             size too), host_copy.* and host_reduce.* (all collectives
                             and rank counts in one fit, used between nodes)
  handshake, call overhead   the only parameters a collective alone reveals:
                             calibration points, gpucoll's one-node
                             algorithms on tiny messages (8 B and 2 KiB by
                             default, below the 64 KiB where model-check.py
                             starts): call_overhead_us and sync_us at np 2,
                             oversubscribed_sync_us at twice the cores (emu:
                             np 4, two ranks per core) and
                             oversubscribed_sync.np<L>_us at the counts
                             between (np 3)
  fixed                      emu: peer_local_memory 1, peer.latency_us 0,
                             shared_cores = the CPUs this process may use

Every fit is a least-squares fit of relative errors (non-negative); the output
says what each parameter is and how it was obtained. The file starts from the
nearest preset (`gpucoll_topo --model PRESET --params`) and overrides what was
measured.

--save FILE also keeps the raw measurements (JSON, written as each section
ends); --load FILE fits them again without measuring (e.g. with another
--cache-bytes or preset), with the settings and machine facts they were
measured with.

The copy and reduction repetitions alternate with the host-algorithm ones
(one of each in turn): this VM's memory bandwidth moves over minutes, and
the rates then see the minutes the host runs take.

The machine must be quiet: before every batch of runs the script waits until
the 1-minute load average is below --max-load (polling every 20 s, at most
--load-timeout seconds, then goes on and says so), and before every run until
the CPUs are idle; a run during which other processes used more than
--foreign-max of the CPUs is repeated (up to --retries times).
"""

import argparse
import datetime
import json
import math
import os
import re
import resource
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

COLLS = ["allreduce", "bcast", "allgather", "reduce_scatter", "reduce_scatter_block", "reduce"]
# The selection table's algorithms on one node (src/intra/selection.cc), staged apart.
ONE_NODE = {
    "allreduce": ["one_shot", "two_shot", "ring"],
    "bcast": ["direct", "chain"],
    "allgather": ["direct", "ring"],
    "reduce_scatter": ["direct", "ring"],
    "reduce_scatter_block": ["direct", "ring"],
    "reduce": ["direct"],
}
REDUCING = {"allreduce", "reduce_scatter", "reduce_scatter_block", "reduce"}
# one_shot falls back to two_shot above its scratch slot unless this is raised.
ONE_SHOT_MAX = 1 << 26

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)


# ------------------------------------------------------------------ helpers


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KkMmGg]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 64K, 1M)")
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(float(m.group(1)) * mult)


def parse_range(text):
    """MIN:MAX -> list of sizes, doubling."""
    if ":" not in text:
        raise argparse.ArgumentTypeError(f"bad size range '{text}' (MIN:MAX)")
    lo, hi = (parse_size(x) for x in text.split(":", 1))
    if lo < 1 or hi < lo:
        raise argparse.ArgumentTypeError(f"bad size range '{text}'")
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def parse_list(text, conv=str):
    return [conv(x) for x in text.split(",") if x.strip()]


def human(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return str(b)


def say(*args):
    print(*args, flush=True)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def find_build(given=None):
    """A build tree with perf/gpucoll_bench and tools/gpucoll_topo."""

    def ok(d):
        return os.access(os.path.join(d, "perf", "gpucoll_bench"), os.X_OK) and os.access(
            os.path.join(d, "tools", "gpucoll_topo"), os.X_OK
        )

    if given:
        if not ok(given):
            sys.exit(f"{given}: no perf/gpucoll_bench and tools/gpucoll_topo (build it first)")
        return os.path.abspath(given)
    cands = [os.path.join(TOP, "_build")]
    base = os.path.join(TOP, "_build")
    if os.path.isdir(base):
        cands += [os.path.join(base, d) for d in sorted(os.listdir(base))]
    best = None
    for d in cands:
        if not ok(d):
            continue
        mk = os.path.join(d, "Makefile")
        try:
            with open(mk) as f:
                if re.search(r"^CFLAGS = .*-fsanitize", f.read(), re.M):
                    continue  # sanitizer builds: timings mean nothing
        except OSError:
            pass
        t = os.path.getmtime(os.path.join(d, "perf", "gpucoll_bench"))
        if best is None or t > best[0]:
            best = (t, d)
    if best is None:
        sys.exit("no build tree with perf/gpucoll_bench found; pass one with -b")
    return best[1]


def has_cuda(build):
    try:
        with open(os.path.join(build, "config.h")) as f:
            if not re.search(r"^#define GPUCOLL_HAVE_CUDA 1", f.read(), re.M):
                return False
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        return out.startswith("GPU") or "\nGPU" in out
    except OSError:
        return False


def cpu_times():
    """(busy, total) jiffies of all CPUs."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Runner:
    """Runs the benchmarks of one build tree on a quiet machine."""

    def __init__(self, args):
        self.build = find_build(args.build)
        self.device = args.device or ("cuda" if has_cuda(self.build) else "emu")
        self.cores = len(os.sched_getaffinity(0))
        self.max_load = args.max_load
        self.load_timeout = args.load_timeout
        self.foreign_max = args.foreign_max
        self.retries = args.retries
        self.verbose = args.verbose
        self.extra_mpirun = shlex.split(args.mpirun_args or "")
        self.hz = os.sysconf("SC_CLK_TCK")
        self.loads = []  # load average before each batch
        self.gave_up = 0  # batches started without the load going down
        self.disturbed = 0  # runs repeated because others used the CPUs
        self.kept_disturbed = 0  # runs kept disturbed after the retries
        self.runs = 0
        self.commands = []  # one example of each kind, for the report
        comp = os.path.join(self.build, "coll", ".libs")
        self.env = dict(os.environ)
        self.env["OMPI_MCA_mca_base_component_path"] = f"{comp}:SYS_DEFAULT:USER_DEFAULT"
        lib = os.path.join(self.build, "src", ".libs")
        old = self.env.get("LD_LIBRARY_PATH")
        self.env["LD_LIBRARY_PATH"] = lib + (":" + old if old else "")
        if os.getuid() == 0:
            self.env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            self.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"

    # --- a quiet machine

    def wait_load(self):
        """Before a batch: the 1-minute load average below max_load."""
        t0 = time.time()
        while True:
            with open("/proc/loadavg") as f:
                load = float(f.read().split()[0])
            if load < self.max_load:
                break
            if time.time() - t0 >= self.load_timeout:
                self.gave_up += 1
                say(f"# load {load:.2f} still >= {self.max_load} after {self.load_timeout:.0f} s: going on")
                break
            time.sleep(20)
        self.loads.append(load)
        if self.verbose:
            say(f"# load {load:.2f} (waited {time.time() - t0:.0f} s)")
        return load

    def wait_idle(self, limit_s=600):
        """Before a run: other processes use less than foreign_max of the CPUs (1 s samples)."""
        t0 = time.time()
        while True:
            b0, a0 = cpu_times()
            time.sleep(1)
            b1, a1 = cpu_times()
            busy = (b1 - b0) / max(1, a1 - a0)
            if busy < self.foreign_max or time.time() - t0 > limit_s:
                return busy
            time.sleep(4)

    def run(self, cmd, what):
        """Runs cmd (a list, or a list of lists run at once) on an idle machine; repeats it
        while other processes took more than foreign_max of the CPUs. Returns the outputs."""
        many = isinstance(cmd[0], list)
        cmds = cmd if many else [cmd]
        if what not in {c[0] for c in self.commands}:
            self.commands.append((what, " ".join(shlex.quote(a) for a in cmds[0])))
        for attempt in range(self.retries + 1):
            self.wait_idle()
            b0, a0 = cpu_times()
            c0 = children_cpu_s()
            w0 = time.time()
            procs = [
                subprocess.Popen(c, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for c in cmds
            ]
            outs = [p.communicate()[0] for p in procs]
            wall = time.time() - w0
            b1, a1 = cpu_times()
            mine = children_cpu_s() - c0
            self.runs += 1
            for p, o in zip(procs, outs):
                if p.returncode != 0:
                    sys.stderr.write(o[-3000:])
                    sys.exit(f"{what}: exit {p.returncode}: {' '.join(shlex.quote(a) for a in cmds[0])}")
            # Jiffies of all CPUs busy during the run, less our children's CPU time.
            foreign = ((b1 - b0) / self.hz - mine) / max(1e-9, wall * self.cores)
            if foreign <= self.foreign_max:
                break
            if attempt < self.retries:
                self.disturbed += 1
                say(f"# {what}: other processes used {100 * foreign:.0f}% of the CPUs: again")
            else:
                self.kept_disturbed += 1
                say(f"# {what}: other processes used {100 * foreign:.0f}% of the CPUs: kept")
        if self.verbose:
            say(f"# {what}: {wall:.1f} s")
        return outs if many else outs[0]

    # --- the tools

    def kernel_bench(self, size, iters, procs, device=None):
        """(copy, reduce) traffic GB/s per process, averaged over procs processes at once."""
        exe = os.path.join(self.build, "perf", "gpucoll_kernel_bench")
        cmd = [exe, "-d", device or self.device, "-m", f"{size}:{size}", "-i", str(iters)]
        outs = self.run([cmd] * procs, f"kernel_bench x{procs}")
        copy, red = [], []
        for out in outs:
            for line in out.splitlines():
                f = line.split()
                if line.startswith("#") or len(f) < 4 or not f[0].isdigit():
                    continue
                copy.append(float(f[1]))
                red.append(float(f[2]))  # float sum
        if len(copy) != procs:
            sys.exit(f"gpucoll_kernel_bench: unexpected output:\n{outs[0]}")
        return statistics.mean(copy), statistics.mean(red)

    def mpirun(self, np, mca, args):
        cmd = ["mpirun", "-np", str(np)]
        if np > self.cores:
            cmd.append("--oversubscribe")
            # Open MPI binds ranks to cores while they fit and leaves them unbound beyond;
            # unbound, the scheduler places ranks and stream threads anew in every run,
            # and 4 ranks on 2 cores land in one of two modes (64 KiB reduce_scatter
            # direct: 27-32 or 49-50 us, 2 runs in 5 slow). Bound round-robin, every run
            # places them the same way (5 of 5 at 26-32 us).
            if not any(a.startswith(("--bind-to", "--map-by")) for a in self.extra_mpirun):
                cmd += ["--map-by", "core", "--bind-to", "core:overload-allowed"]
        if os.getuid() == 0:
            cmd.append("--allow-run-as-root")
        cmd += ["-x", "LD_LIBRARY_PATH"] + self.extra_mpirun
        for k, v in mca.items():
            cmd += ["--mca", k, str(v)]
        return cmd + [os.path.join(self.build, "perf", "gpucoll_bench")] + args

    def bench(self, np, coll, sizes, tcap, algo=None, host=False, what=None):
        """{(coll, size): (avg us, path, algorithm)} of one gpucoll_bench run."""
        mca = {}
        if host:
            mca["coll"] = "^gpucoll"
            args = [coll, "-d", "host"]
        else:
            mca["coll_gpucoll_device"] = self.device
            if algo:
                mca[f"coll_gpucoll_{coll}_algorithm"] = algo
                if algo == "one_shot":
                    mca["coll_gpucoll_allreduce_one_shot_max"] = ONE_SHOT_MAX
            args = [coll, "-d", self.device]
        args += ["-m", f"{min(sizes)}:{max(sizes)}", "-T", str(tcap)]
        out = self.run(self.mpirun(np, mca, args), what or ("host" if host else f"gpucoll_bench {algo or 'auto'}"))
        return parse_bench(out, set(sizes))

    def topo(self, model, np, colls, sizes):
        """{(coll, algo, size): predicted us} from gpucoll_topo."""
        exe = os.path.join(self.build, "tools", "gpucoll_topo")
        res = {}
        for coll in colls:
            cmd = [exe, "--model", model, "--ranks-per-node", str(np), "--coll", coll,
                   "--sizes", f"{min(sizes)}:{max(sizes)}"]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"gpucoll_topo failed: {out.stderr.strip()}")
            res.update(parse_topo(out.stdout))
        return {k: v for k, v in res.items() if k[2] in set(sizes)}

    def preset_text(self, preset):
        exe = os.path.join(self.build, "tools", "gpucoll_topo")
        out = subprocess.run([exe, "--model", preset, "--params"], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"gpucoll_topo --model {preset} --params: {out.stderr.strip()}")
        return out.stdout


def parse_bench(out, sizes=None):
    """{(coll, size): (avg us, path, algorithm)}; a row's size is matched to the nearest of
    sizes within 1% (allgather and reduce_scatter_block round the buffer to whole blocks)."""
    rows, coll = {}, None
    for line in out.splitlines():
        m = re.match(r"# gpucoll_bench \S+: (\w+), np", line)
        if m:
            coll = m.group(1)
            continue
        f = line.split()
        if line.startswith("#") or len(f) < 12 or not f[0].isdigit():
            continue
        size = int(f[0])
        if sizes is not None:
            near = min(sizes, key=lambda x: abs(x - size))
            if abs(near - size) > near / 100:
                continue
            size = near
        rows[(coll, size)] = (float(f[2]), f[8], f[9].rstrip("*"))
    return rows


def parse_topo(out):
    res, coll, algos = {}, None, []
    for line in out.splitlines():
        m = re.match(r"(\w+) on \d+ node\(s\) x \d+ rank\(s\): predicted", line)
        if m:
            coll, algos = m.group(1), []
            continue
        f = line.split()
        if coll and f and f[0] == "bytes":
            algos = f[1:-1]
            continue
        if coll and algos and f and re.fullmatch(r"\d+[KMG]?", f[0]):
            size, cells = parse_size(f[0]), line[8:]
            vals = re.findall(r"(-|\S+ /\s*\S+)", cells)
            for a, v in zip(algos, vals):
                if v != "-":
                    res[(coll, a, size)] = float(v.split("/")[0])
    return res


# Keys a preset's file leaves out until measured (values per rank count, L = 3..8, the
# tables 2..8; peer_cache_bytes), and the key a file writes them after. A starting file's
# value of one that this run did not measure is dropped, not carried over.
PER_COUNT_KEYS = ((r"host\.np[2-8]\.\w+\.\w+", "host."),
                  (r"algo\.np[2-8]\.\w+\.\w+\.table_us", "host."),
                  (r"oversubscribed_sync\.np[3-8]_us", "oversubscribed_sync_us"),
                  (r"peer_cache_bytes", "cache_bytes"))
# The comment a group of keys the preset's text lacks starts with (gpucoll_topo's help).
GROUP_HELP = {r"algo\.np[2-8]\.\w+\.\w+\.table_us":
              "an accelerated algorithm on one node of L = 2..8 ranks, measured at small sizes: "
              "'bytes:us' pairs with sizes increasing; up to the last size the time is the table's "
              "(log-log between the points), beyond it the last time plus what the formulas add "
              "from there (the formulas' fixed part replaced by measurement; absent: the formulas)",
              r"peer_cache_bytes":
              "the cache bytes read from a peer see, when smaller (emu: memory another core wrote, "
              "read across cores); min(1, this/W) of the peer bytes at the cached rates (absent or "
              "0: cache_bytes)"}
ALGO_TABLE = r"algo\.np[2-8]\.\w+\.\w+\.table_us"


def set_keys(text, values):
    """The params text with values[key] in place of the file's values (None: the key's
    line left out)."""
    def text_of(v):
        return (repr(round(v, 6)) if v != int(v) else str(int(v))) if isinstance(v, float) else v

    out, seen = [], set()
    for line in text.splitlines():
        m = re.match(r"^([\w.]+)\s*=", line)
        if m and m.group(1) in values:
            key = m.group(1)
            seen.add(key)
            if values[key] is None:
                continue
            line = f"{key} = {text_of(values[key])}"
        out.append(line)
    # A group's comment whose keys were all dropped (a starting file's, not measured
    # now) goes too, with the blank line before it: new keys of the group get their own.
    for pattern, help_text in GROUP_HELP.items():
        if any(re.match(pattern + r"\s*=", line) for line in out):
            continue
        for i in reversed(range(len(out))):
            if out[i] == f"# {help_text}":
                del out[i - 1 if i > 0 and out[i - 1] == "" else i:i + 1]
    # A file names only the rank counts measured: their keys go after the values
    # measured at 2 ranks (host.*) or the generic one (oversubscribed_sync_us).
    for pattern, after in PER_COUNT_KEYS:
        extra = sorted(k for k in values
                       if k not in seen and values[k] is not None and re.fullmatch(pattern, k))
        if extra:
            last = max(i for i, line in enumerate(out) if line.startswith(after))
            lines = [f"{k} = {text_of(values[k])}" for k in extra]
            if pattern in GROUP_HELP and not any(re.match(pattern, line) for line in out):
                lines = ["", f"# {GROUP_HELP[pattern]}"] + lines
            out[last + 1:last + 1] = lines
            seen.update(extra)
    missing = {k for k in values if values[k] is not None} - seen
    if missing:
        sys.exit(f"the preset's params have no key(s) {sorted(missing)}: is the build's gpucoll_topo current?")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ a shared-write primitive


def pinned_children(procs, work, what):
    """Runs work(me, report) in procs forked children, child me pinned to one core; each
    reports a number through report(x). Returns the numbers. Every child is a child:
    work() pins its process, and this process's affinity is what every later mpirun
    inherits (the oversubscribed ranks, which Open MPI leaves unbound, would share one
    core). A child that fails says why and exits 1; then the others are killed (they
    would wait for it at the next barrier) and the calibration stops."""
    cores = sorted(os.sched_getaffinity(0))
    rfd, wfd = os.pipe()
    kids, failed = [], False
    try:
        for me in range(procs):
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    os.close(rfd)
                    os.sched_setaffinity(0, {cores[me % len(cores)]})
                    work(me, lambda x: os.write(wfd, f"{x}\n".encode()))
                    status = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(status)
            kids.append(pid)
        while kids:
            pid, status = os.wait()
            if pid in kids:
                kids.remove(pid)
                failed = failed or status != 0
                if failed:
                    break
    finally:
        for pid in kids:  # left running: a failure, an interrupt, a fork that failed
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(wfd)
    with os.fdopen(rfd) as f:
        out = f.read() if not (failed or kids) else ""
    if failed or kids:
        sys.exit(f"{what}: a process failed (above)")
    return [float(x) for x in out.split()]


class SharedBuffers:
    """procs buffers of size bytes in shared memory, and a barrier over them."""

    def __init__(self, procs, size):
        import ctypes
        import mmap
        self.procs, self.size = procs, size
        self.shm = mmap.mmap(-1, procs * size + 4096)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.shm))
        self.flags = (ctypes.c_int64 * procs).from_address(self.base + procs * size)

    def buffer(self, i):
        return self.base + (i % self.procs) * self.size

    def barrier(self, me, gen, what):
        self.flags[me] = gen
        deadline = time.monotonic() + 60
        while any(self.flags[j] < gen for j in range(self.procs)):
            if time.monotonic() > deadline:  # a process died: do not spin on a core for good
                raise RuntimeError(f"{what}: process {me} waited 60 s at a barrier")


def shared_write_run(size, iters, procs):
    """procs processes, one per core, exchange buffers of size bytes in shared memory: each
    writes its own buffer (which the next one read the round before), all wait, each reads the
    next one's buffer, all wait. Returns the median over rounds and processes of (time of the
    shared write - time of the same write into a buffer nobody else reads), in microseconds."""
    import ctypes

    sh = SharedBuffers(procs, size)

    def work(me, report):
        mine, nxt = sh.buffer(me), sh.buffer(me + 1)
        src, dst, priv = (ctypes.create_string_buffer(size) for _ in range(3))
        extra, gen = [], 0
        for i in range(iters):
            gen += 1
            sh.barrier(me, gen, "shared writes")
            t0 = time.perf_counter()
            ctypes.memmove(mine, src, size)
            t1 = time.perf_counter()
            gen += 1
            sh.barrier(me, gen, "shared writes")
            ctypes.memmove(dst, nxt, size)
            t2 = time.perf_counter()
            ctypes.memmove(priv, src, size)
            t3 = time.perf_counter()
            if i >= 3:
                extra.append((t1 - t0) - (t3 - t2))
        report(statistics.median(extra) * 1e6)

    vals = pinned_children(procs, work, "shared writes")
    sh.shm.close()
    return median(vals)


def cross_copy_run(size, iters, procs):
    """procs processes, one per core: each writes its own buffer of size bytes in shared
    memory (a rank writing its input), all wait, each copies the next one's buffer into a
    private one (a rank reading its peer), all wait. The working set is procs x 2 x size.
    Returns the median over rounds of the copy, in microseconds, averaged over processes."""
    import ctypes

    sh = SharedBuffers(procs, size)

    def work(me, report):
        mine, nxt = sh.buffer(me), sh.buffer(me + 1)
        dst = ctypes.create_string_buffer(size)
        ts, gen = [], 0
        for i in range(iters):
            ctypes.memset(mine, i & 0xFF, size)
            gen += 1
            sh.barrier(me, gen, "cross-core copies")
            t0 = time.perf_counter()
            ctypes.memmove(dst, nxt, size)
            t1 = time.perf_counter()
            gen += 1
            sh.barrier(me, gen, "cross-core copies")
            if i >= 2:
                ts.append(t1 - t0)
        report(statistics.median(ts) * 1e6)

    vals = pinned_children(procs, work, "cross-core copies")
    sh.shm.close()
    return sum(vals) / len(vals)


# ------------------------------------------------------------------ fitting


def solve(a, b):
    """Gaussian elimination with partial pivoting; None when singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[p][c]) < 1e-300:
            return None
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                k = m[r][c] / m[c][c]
                for j in range(c, n + 1):
                    m[r][j] -= k * m[c][j]
    return [m[i][n] / m[i][i] for i in range(n)]


def nnls(rows, rhs):
    """min |rows x - rhs| with x >= 0 (Lawson-Hanson active set, small problems)."""
    n = len(rows[0])

    def lsq(cols):
        a = [[sum(r[i] * r[j] for r in rows) for j in cols] for i in cols]
        b = [sum(r[i] * y for r, y in zip(rows, rhs)) for i in cols]
        return solve(a, b)

    x = [0.0] * n
    passive = []
    for _ in range(3 * n + 10):
        resid = [y - sum(r[j] * x[j] for j in range(n)) for r, y in zip(rows, rhs)]
        grad = [sum(r[j] * e for r, e in zip(rows, resid)) for j in range(n)]
        cand = [j for j in range(n) if j not in passive and grad[j] > 1e-12]
        if not cand:
            break
        passive.append(max(cand, key=lambda j: grad[j]))
        while True:
            z = lsq(sorted(passive))
            if z is None:
                passive.pop()
                break
            zf = dict(zip(sorted(passive), z))
            if all(v > 0 for v in zf.values()):
                x = [zf.get(j, 0.0) for j in range(n)]
                break
            alpha = min(x[j] / (x[j] - zf[j]) for j in passive if zf[j] <= 0 and x[j] - zf[j] > 0) if any(
                zf[j] <= 0 and x[j] - zf[j] > 0 for j in passive) else 0.0
            x = [x[j] + alpha * (zf.get(j, 0.0) - x[j]) if j in passive else 0.0 for j in range(n)]
            passive = [j for j in passive if x[j] > 1e-15]
            if not passive:
                break
    return x


def relative_fit(features, times):
    """x >= 0 minimising sum((features . x) / t - 1)^2; also the rms relative error."""
    rows = [[f / t for f in fs] for fs, t in zip(features, times)]
    x = nnls(rows, [1.0] * len(rows))
    errs = [sum(a * b for a, b in zip(fs, x)) / t - 1 for fs, t in zip(features, times)]
    return x, math.sqrt(sum(e * e for e in errs) / len(errs))


def last_level_cache_bytes():
    """Bytes of the highest-level cache of the first CPU this process may use (sysfs),
    0 when sysfs does not say."""
    cpu = min(os.sched_getaffinity(0))
    base = f"/sys/devices/system/cpu/cpu{cpu}/cache"
    best = (0, 0)
    try:
        for entry in os.listdir(base):
            if not entry.startswith("index"):
                continue
            with open(os.path.join(base, entry, "level")) as f:
                level = int(f.read())
            with open(os.path.join(base, entry, "size")) as f:
                size = parse_size(f.read().strip())
            best = max(best, (level, size))
    except (OSError, ValueError, argparse.ArgumentTypeError):
        return 0
    return best[1]


def cached_fraction(ws, cache):
    if cache <= 0:
        return 0.0
    return 1.0 if ws <= cache else cache / ws


def fit_memory(points, cache_grid):
    """points: (kind, ws bytes, traffic bytes, us). Best cache size and per kind
    (us/byte in cache, us/byte beyond); cache 0 when cache_grid is [0]."""
    best = None
    for cache in cache_grid:
        total, per = 0.0, {}
        for kind in sorted({p[0] for p in points}):
            pts = [p for p in points if p[0] == kind]
            feats = []
            for _, ws, traffic, _ in pts:
                f = cached_fraction(ws, cache)
                feats.append([traffic * f, traffic * (1 - f)] if cache > 0 else [traffic])
            x, rms = relative_fit(feats, [p[3] for p in pts])
            if cache <= 0:
                x = [x[0], x[0]]
            per[kind] = (x, rms)
            total += rms * rms * len(pts)
        if best is None or total < best[0]:
            best = (total, cache, per)
    return best[1], best[2]


def gbps(us_per_byte, cap=1e6):
    return cap if us_per_byte <= 0 else min(cap, 1.0 / (us_per_byte * 1e3))


# ------------------------------------------------------------------ the model's host terms


def host_terms(coll, size, p, cores):
    """Features of Open MPI's host algorithm in the model's staged formula
    (src/topo/cost_model.cc, Model::staged): steps, lower-bound bytes, reduced
    traffic, each times the core share; and the host run's working set."""
    share = max(1.0, p / cores) if cores > 0 else 1.0
    steps = math.ceil(math.log2(p)) * (2 if coll == "allreduce" else 1) if p > 1 else 0
    if coll == "allreduce":
        lb = 2.0 * (p - 1) * size / p
    elif coll in ("bcast", "reduce"):
        lb = float(size)
    else:
        lb = (p - 1) * size / p
    red = 3.0 * (p - 1) * size / p if coll in REDUCING else 0.0
    inb, outb = float(size), float(size)
    if coll == "allgather":
        inb = size / p
    if coll.startswith("reduce_scatter"):
        outb = size / p
    if coll == "bcast":
        outb = 0.0
    if coll == "reduce":
        outb = size / p
    return steps * share, lb * share, red * share, p * (inb + outb)


# ------------------------------------------------------------------ main


class Raw:
    """The raw measurements of one run by section (--save), or those of an earlier run
    read back (--load), with the settings and machine facts they were measured with."""

    def __init__(self, load=None, save=None):
        self.load, self.save_to, self.meta, self.data = load, save, {}, {}
        if load:
            with open(load) as f:
                saved = json.load(f)
            self.meta = saved["meta"]
            for name, v in saved["data"].items():
                self.data[name] = v if isinstance(v, list) else {
                    (tuple(k) if isinstance(k, list) else k): x
                    for k, x in ((json.loads(k), x) for k, x in v.items())}

    def get(self, name):
        """A section read back, or None when it is to be measured."""
        if self.load and name not in self.data:
            sys.exit(f"{self.load} has no measurements '{name}': measure again")
        return self.data.get(name)

    def put(self, name, value, r):
        self.data[name] = value
        if self.save_to:
            self.meta.update(loads=r.loads, runs=r.runs, disturbed=r.disturbed, commands=r.commands,
                             kept_disturbed=r.kept_disturbed, gave_up=r.gave_up)
            data = {n: v if isinstance(v, list) else {json.dumps(list(k) if isinstance(k, tuple) else k): x
                                                      for k, x in v.items()}
                    for n, v in self.data.items()}
            tmp = self.save_to + ".tmp"  # an interrupt leaves the last complete file
            with open(tmp, "w") as f:
                json.dump({"meta": self.meta, "data": data}, f, indent=1)
            os.replace(tmp, self.save_to)


def parser(doc, examples):
    """The command line every script here starts from (model-check.py too):
    the docstring as help, the build tree and the backend."""
    ap = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(doc.split("\n\n")[1:]) + "\n\nexamples:\n" + examples,
    )
    ap.add_argument("-b", "--build", help="build tree (default: the newest under _build/)")
    ap.add_argument("-d", "--device", choices=["emu", "cuda"], help="backend (default: cuda if a GPU and a CUDA build, else emu)")
    return ap


def add_runner_args(ap, what):
    """The Runner's settings (waiting for a quiet machine, repeating
    disturbed runs); what: when the load is checked."""
    ap.add_argument("--max-load", type=float, default=0.5, help="wait for a 1-minute load average below this before each " + what + " (default 0.5)")
    ap.add_argument("--load-timeout", type=float, default=600, help="give up waiting for the load after this many seconds (default 600)")
    ap.add_argument("--foreign-max", type=float, default=0.1, help="repeat a run when other processes used more than this share of the CPUs (default 0.1)")
    ap.add_argument("--retries", type=int, default=3, help="repeats of a disturbed run (default 3)")


def main():
    ap = parser(__doc__, """  contrib/calibrate.py -b _build/model -o perf/emu-vm.params --name emu-vm
  contrib/calibrate.py -d cuda --preset h100-nvswitch -o h100.params -r 5""")
    ap.add_argument("-o", "--output", help="params file to write (default: print it)")
    ap.add_argument("--preset", help="preset to start from (default: emu, or h100-nvswitch for cuda)")
    ap.add_argument("--name", help="the machine's name in the file (default: <preset>-calibrated)")
    ap.add_argument("-r", "--reps", type=int, default=3, help="repetitions of every measurement, median (default 3)")
    ap.add_argument("--kernel-sizes", type=lambda s: parse_list(s, parse_size),
                    default=parse_list("64K,256K,1M,2M,3M,4M,6M,8M,12M,16M,24M,32M,48M,64M", parse_size),
                    help="sizes of the copy and reduction benchmark (default 64K..64M, 14 sizes)")
    ap.add_argument("--cache-bytes", default="llc",
                    help="emu: the cache the model's cache term uses: llc (default: the CPUs' "
                         "last-level cache, from sysfs), fit (the size that fits the copy and "
                         "reduction best; with a private cache level below it, the fit may "
                         "settle on either), or a size (e.g. 32M)")
    ap.add_argument("--kernel-iters", type=int, default=30, help="iterations per size (default 30)")
    ap.add_argument("--latency-size", type=parse_size, default=64, help="size whose time is the fixed cost of a copy or reduction (default 64 B)")
    ap.add_argument("--shared-sizes", type=lambda s: parse_list(s, parse_size),
                    default=parse_list("64K,128K,256K", parse_size),
                    help="sizes of the shared-write primitive (default 64K,128K,256K)")
    ap.add_argument("--shared-iters", type=int, default=60, help="its rounds (default 60)")
    ap.add_argument("--cross-sizes", type=lambda s: parse_list(s, parse_size),
                    default=[parse_size(x) for x in "2M,3M,4M,6M,8M,12M,16M,24M,32M".split(",")],
                    help="per-process sizes of the cross-core copies (default 2M,3M,4M,6M,8M,12M,16M,24M,32M)")
    ap.add_argument("--host-np", type=lambda s: parse_list(s, int), default=None,
                    help="ranks of the host-algorithm runs; 3..8 get rates of their own, 2..8 tables "
                         "(default emu: 2 to twice the cores, at most 8; cuda: 2)")
    ap.add_argument("--host-sizes", type=parse_range, default=parse_range("8:64M"), help="sizes of the host-algorithm runs (default 8:64M)")
    ap.add_argument("--sync-np", type=int, default=2, help="ranks of the handshake / call-overhead calibration points (default 2)")
    ap.add_argument("--oversub-np", type=lambda s: parse_list(s, int), default=None,
                    help="ranks of the oversubscribed handshake's calibration points, more than the "
                         "cores (emu; default twice the cores and every count from cores + 1 below "
                         "it, up to 8; 0: none): the largest gives oversubscribed_sync_us, the "
                         "others (3..8) oversubscribed_sync.np<L>_us")
    ap.add_argument("--sync-sizes", type=lambda s: parse_list(s, parse_size), default=[8, 2048],
                    help="their sizes (default 8,2K; keep them below model-check's sizes)")
    ap.add_argument("-T", "--time-cap", type=float, default=0.3, help="gpucoll_bench -T (default 0.3 s)")
    add_runner_args(ap, "batch")
    ap.add_argument("--mpirun-args", help="extra mpirun arguments (one string)")
    ap.add_argument("--save", help="also write the raw measurements to this JSON file")
    ap.add_argument("--load", help="fit the raw measurements of this JSON file (from --save) "
                                   "instead of measuring; the machine's facts (cores, cache, "
                                   "device) come from the file")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.load and args.save:
        ap.error("--load fits saved measurements: there is nothing new to --save")

    r = Runner(args)
    raw = Raw(args.load, args.save)
    if args.load:  # the settings and the machine of the measurements
        for k in ("device", "cores", "loads", "runs", "disturbed", "kept_disturbed", "gave_up", "commands"):
            setattr(r, k, raw.meta[k])
        for k in ("reps", "latency_size", "host_np", "oversub_np", "sync_np", "sync_sizes"):
            setattr(args, k, raw.meta[k])
    emu = r.device == "emu"
    if args.oversub_np is None:  # twice the cores, and the counts between that have keys
        args.oversub_np = [2 * r.cores] + list(range(max(3, r.cores + 1), min(8, 2 * r.cores) + 1))
    wanted = sorted({n for n in args.oversub_np if n > r.cores and n >= 2}, reverse=True)
    # The largest gives oversubscribed_sync_us; the others need a key of their own (3..8).
    args.oversub_np = wanted[:1] + [n for n in wanted[1:] if 3 <= n <= 8]
    if len(args.oversub_np) < len(wanted):
        say(f"# --oversub-np: {sorted(set(wanted) - set(args.oversub_np))} left out (only the "
            f"largest count or counts 3..8 have a parameter)")
    if args.host_np is None:
        args.host_np = list(range(2, max(2, min(8, 2 * r.cores)) + 1)) if emu else [2]
    preset = args.preset or ("emu" if emu else "h100-nvswitch")
    cores = r.cores if emu else 0
    host = raw.meta.get("host") or socket.gethostname()
    stamp = raw.meta.get("date") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if args.load:
        say(f"# fitting the measurements of {args.load}, not measuring")
    else:
        raw.meta.update(host=host, date=stamp, device=r.device, cores=r.cores,
                        llc=last_level_cache_bytes(), reps=args.reps, latency_size=args.latency_size,
                        host_np=args.host_np, oversub_np=args.oversub_np, sync_np=args.sync_np,
                        sync_sizes=args.sync_sizes)
    say(f"# contrib/calibrate.py on {host}, {stamp}: build {r.build}, device {r.device}, "
        f"{r.cores} cores, preset {preset}, {args.reps} repetitions (medians)")
    values = {}

    # The device's copy and reduction (every core busy on emu) and Open MPI's host
    # algorithm (host buffers, the component off: what the staged path runs), measured in
    # turn, one repetition of each: this VM's memory bandwidth moves over minutes (the
    # 64 MiB copy at 11.9 or 14.2 GB/s in two calibrations an hour apart), and repetitions
    # spread over the host runs' minutes see more of it than three in a row.
    procs = max(1, cores)
    meas, hmeas = raw.get("kernel"), raw.get("host")
    if meas is None:
        say(f"\n## measuring: gpucoll_kernel_bench ({procs} process(es) at once) and gpucoll_bench -d host "
            f"(--mca coll ^gpucoll, np {','.join(map(str, args.host_np))}), {args.reps} repetitions in turn")
        meas, hmeas = {}, {}
        for rep in range(args.reps):
            r.wait_load()
            for s in args.kernel_sizes + [args.latency_size]:
                meas.setdefault(s, []).append(r.kernel_bench(s, args.kernel_iters, procs))
            r.wait_load()
            for np in args.host_np:
                for coll in COLLS:
                    for (c, s), (t, _, _) in r.bench(np, coll, args.host_sizes, args.time_cap, host=True,
                                                     what="host algorithm").items():
                        hmeas.setdefault((np, c, s), []).append(t)
        raw.put("kernel", meas, r)
        raw.put("host", hmeas, r)

    # 1. device copy and reduction, in cache and beyond
    say(f"\n## device copy and reduction: gpucoll_kernel_bench, {procs} process(es) at once")
    if args.load:  # the sizes measured
        args.kernel_sizes = sorted(s for s in meas if s != args.latency_size)
    points = []
    say(f"# {'size(B)':>10} {'copy GB/s':>10} {'reduce GB/s':>12}   (traffic per process: copy 2S/t, reduce 3S/t)")
    for s in args.kernel_sizes:
        copy = median([m[0] for m in meas[s]])
        red = median([m[1] for m in meas[s]])
        say(f"  {s:>10} {copy:>10.1f} {red:>12.1f}")
        points.append(("copy", procs * 2 * s, 2 * s, 2 * s / (copy * 1e3)))
        points.append(("reduce", procs * 3 * s, 3 * s, 3 * s / (red * 1e3)))
    fit_grid = [float(int((1 << 20) * 2 ** (k / 8))) for k in range(0, 8 * 8 + 1)]  # 1-256 MiB
    llc = raw.meta["llc"] if emu and args.cache_bytes == "llc" else 0
    if not emu:
        grid, how = [0.0], "none (cuda)"
    elif args.cache_bytes == "fit":
        grid, how = fit_grid, "fitted"
    elif args.cache_bytes == "llc":
        grid, how = ([float(llc)], "the CPUs' last-level cache (sysfs)") if llc > 0 else \
            (fit_grid, "fitted (sysfs names no cache)")
    else:
        grid, how = [float(parse_size(args.cache_bytes))], "given"
    cache, per = fit_memory(points, grid)
    (cc, cm), copy_rms = per["copy"]
    (rc, rm), red_rms = per["reduce"]
    ls = args.latency_size
    lat_copy = max(0.0, 2 * ls / (median([m[0] for m in meas[ls]]) * 1e3) - 2 * ls * (cc if emu else cm))
    lat_red = max(0.0, 3 * ls / (median([m[1] for m in meas[ls]]) * 1e3) - 3 * ls * (rc if emu else rm))
    values.update({
        "device_copy.latency_us": lat_copy,
        "device_copy.bandwidth_GBps": gbps(cm),
        "device_copy.cached_GBps": gbps(cc) if emu else 0.0,
        "device_reduce.latency_us": lat_red,
        "device_reduce.bandwidth_GBps": gbps(rm),
        "device_reduce.cached_GBps": gbps(rc) if emu else 0.0,
        "cache_bytes": float(int(cache)),
    })
    say(f"# fit: cache {cache / 2**20:.1f} MiB ({how}); copy {gbps(cc):.1f} GB/s in cache, {gbps(cm):.1f} beyond "
        f"(rms {100 * copy_rms:.0f}%); reduce {gbps(rc):.1f} / {gbps(rm):.1f} (rms {100 * red_rms:.0f}%); "
        f"fixed cost at {ls} B: copy {lat_copy:.2f} us, reduce {lat_red:.2f} us")

    if emu:
        # The staging copies are the same memcpy (bytes copied, not traffic), peers' memory is
        # the same memory, and the ranks share the cores.
        values.update({
            "d2h.latency_us": lat_copy, "d2h.bandwidth_GBps": gbps(cm) / 2, "d2h.cached_GBps": gbps(cc) / 2,
            "h2d.latency_us": lat_copy, "h2d.bandwidth_GBps": gbps(cm) / 2, "h2d.cached_GBps": gbps(cc) / 2,
            "peer_local_memory": 1, "peer.latency_us": 0.0, "shared_cores": cores,
        })

    if emu and procs > 1:
        say(f"\n## shared writes: {procs} processes (one per core) write buffers the others "
            f"read (python ctypes memmove), against private buffers")
        pts = raw.get("shared")
        if pts is None:
            pts = []
            for rep in range(args.reps):
                r.wait_load()
                for s in args.shared_sizes:
                    r.wait_idle()
                    pts.append((s, shared_write_run(s, args.shared_iters, procs)))
            raw.put("shared", pts, r)
        if args.load:
            args.shared_sizes = sorted({s for s, e in pts})
        feats = [[s] for s, e in pts if e > 0]
        extra = [e for s, e in pts if e > 0]
        for s in args.shared_sizes:
            say(f"  {s:>10} B: {median([e for z, e in pts if z == s]):8.2f} us more than a private write")
        if extra:
            (k,), rms = relative_fit(feats, extra)
            values["shared_write_GBps"] = gbps(k)
            say(f"# fit: shared writes cost {gbps(k):.1f} GB/s extra (rms {100 * rms:.0f}%)")
        else:
            values["shared_write_GBps"] = 0.0
            say("# no extra cost measured: shared_write_GBps 0")

    # Unset unless measured below: the fits that follow must not use a starting file's value,
    # which the file written at the end would not carry.
    values["peer_cache_bytes"] = None
    if emu and procs > 1 and cache > 0:
        say(f"\n## cross-core copies: {procs} processes (one per core) each write a shared buffer, "
            f"then copy the next one's (python ctypes memmove); working set {procs} x 2 x size")
        if args.load and "cross" not in raw.data:
            say(f"# {args.load} has none (saved before they were measured): peer_cache_bytes unset")
        else:
            pts = raw.get("cross")
            if pts is None:
                pts = []
                for rep in range(args.reps):
                    r.wait_load()
                    for s in args.cross_sizes:
                        r.wait_idle()
                        iters = max(10, min(200, (256 << 20) // s))
                        pts.append((s, cross_copy_run(s, iters, procs)))
                raw.put("cross", pts, r)
            sizes = sorted({s for s, _ in pts})
            points = [("cross", procs * 2 * s, 2 * s, median([t for z, t in pts if z == s])) for s in sizes]
            for _, ws, traffic, t in points:
                say(f"  {traffic // 2:>10} B: {traffic / (t * 1e3):6.1f} GB/s traffic (working set {ws / 2**20:.0f} MiB)")
            grid = [c for c in fit_grid if c < cache] + [cache]
            peer_cache, per_cross = fit_memory(points, grid)
            (pc, pm), rms = per_cross["cross"]
            # Unset (its line left out) where it is the cache itself: the model then uses that.
            values["peer_cache_bytes"] = float(int(peer_cache)) if peer_cache < cache else None
            say(f"# fit: the cache of cross-core reads {peer_cache / 2**20:.1f} MiB (at most cache_bytes, "
                f"{cache / 2**20:.1f}); {gbps(pc):.1f} GB/s in it, {gbps(pm):.1f} beyond (rms {100 * rms:.0f}%)")

    # 2. Open MPI's host algorithm (what the staged path runs), host buffers, component off
    say(f"\n## host algorithm: gpucoll_bench -d host with --mca coll ^gpucoll, np {','.join(map(str, args.host_np))}")
    feats, times, keys = [], [], []
    for (np, coll, s), ts in sorted(hmeas.items()):
        steps, lb, red, ws = host_terms(coll, s, np, cores)
        f = cached_fraction(ws, cache) if emu else 0.0
        feats.append([steps, lb * f, lb * (1 - f), red * f, red * (1 - f)])
        times.append(median(ts))
        keys.append((np, coll, s))
    x, host_rms = relative_fit(feats, times)
    a_h, hc, hm, rc2, rm2 = x
    values.update({
        "host_copy.latency_us": a_h,
        "host_copy.bandwidth_GBps": gbps(hm),
        "host_copy.cached_GBps": gbps(hc) if emu else 0.0,
        "host_reduce.latency_us": 0.0,
        "host_reduce.bandwidth_GBps": gbps(rm2),
        "host_reduce.cached_GBps": gbps(rc2) if emu else 0.0,
    })
    say(f"# {'np':>3} {'collective':<21} {'size(B)':>10} {'measured us':>12} {'fit us':>10}")
    for k, fs, t in zip(keys, feats, times):
        fit = sum(a * b for a, b in zip(fs, x))
        if k[2] >= 1024 or k[2] == 8:
            say(f"  {k[0]:>3} {k[1]:<21} {k[2]:>10} {t:>12.2f} {fit:>10.2f}")
    say(f"# fit, all collectives together (between nodes): step {a_h:.2f} us; host copy "
        f"{gbps(hc):.1f} GB/s in cache, {gbps(hm):.1f} beyond; host reduce {gbps(rc2):.1f} / "
        f"{gbps(rm2):.1f} GB/s (rms {100 * host_rms:.0f}%)")
    # One collective at a time and one rank count at a time (what a one-node staged call
    # uses): steps, lower bound in cache and beyond; Open MPI's choice of algorithm, which
    # changes with the rank count, is folded into the rates. Rank count 2 (or, without
    # it, all of them together) gives host.<coll>.*, 3..8 host.np<L>.<coll>.*.
    groups = [(2 if 2 in args.host_np else None, "host")]
    groups += [(np, f"host.np{np}") for np in args.host_np if 3 <= np <= 8]
    for only, prefix in groups:
        for coll in COLLS:
            feats, times = [], []
            for (np, c, s), ts in sorted(hmeas.items()):
                if c != coll or (only is not None and np != only):
                    continue
                steps, lb, red, ws = host_terms(coll, s, np, cores)
                f = cached_fraction(ws, cache) if emu else 0.0
                feats.append([steps, lb * f, lb * (1 - f)] if emu else [steps, lb])
                times.append(median(ts))
            x, rms = relative_fit(feats, times)
            if not emu:
                x = [x[0], x[1], x[1]]
            values[f"{prefix}.{coll}.latency_us"] = x[0]
            values[f"{prefix}.{coll}.bandwidth_GBps"] = gbps(x[2])
            values[f"{prefix}.{coll}.cached_GBps"] = gbps(x[1]) if emu else 0.0
            who = f"np {only}" if only else f"np {','.join(map(str, args.host_np))}"
            say(f"# {prefix} {coll} ({who}): step {x[0]:.2f} us, lower bound at {gbps(x[1]):.2f} "
                f"GB/s in cache, {gbps(x[2]):.2f} beyond (rms {100 * rms:.0f}% over {len(times)} sizes)")

    # The same, point by point (host.np<L>.<coll>.table_us): what a one-node staged call's
    # host part is read from; the rates above serve the counts and sizes not measured.
    for np in args.host_np:
        if 2 <= np <= 8:
            for coll in COLLS:
                pts = sorted((s, median(ts)) for (n, c, s), ts in hmeas.items() if n == np and c == coll)
                if pts:
                    values[f"host.np{np}.{coll}.table_us"] = " ".join(f"{s}:{t:.4g}" for s, t in pts)
    say(f"# host.np<L>.<coll>.table_us: the medians above, L = "
        f"{','.join(str(n) for n in args.host_np if 2 <= n <= 8)}")

    # 3. sync_us and call_overhead_us (np --sync-np), oversubscribed_sync_us (np
    # --oversub-np, emu): gpucoll's accelerated algorithms on tiny messages. The model
    # is linear in the three; its other terms come from the parameters measured above.
    def calibration_points(np, purpose):
        """purpose: sync or oversub (a count may serve both; each is measured apart)."""
        say(f"\n## calibration points: accelerated algorithms, np {np}, sizes "
            f"{','.join(human(s) for s in args.sync_sizes)} (not validation points)")
        section = f"points.{purpose}.np{np}"
        if args.load and section not in raw.data and f"points.np{np}" in raw.data:
            section = f"points.np{np}"  # saved before the sections named their purpose
        got = raw.get(section)
        if got is not None:
            return got
        got = {}
        for rep in range(args.reps):
            r.wait_load()
            for coll in COLLS:
                for algo in ONE_NODE[coll]:
                    rows = r.bench(np, coll, args.sync_sizes, args.time_cap, algo=algo,
                                   what="calibration points")
                    for (c, s), (t, path, took) in rows.items():
                        if took != algo:
                            say(f"# {c} {algo} {s} B ran {path}/{took}: left out")
                            continue
                        got.setdefault((c, algo, s), []).append(t)
        raw.put(section, got, r)
        return got

    def coefficients(np, fixed, knobs):
        """The model's time at fixed, and d time / d knob for each knob (it is linear):
        from the formulas alone, without the measured algorithm tables of a starting
        params file (they would answer at these sizes instead)."""
        tables = {m.group(1): None for m in re.finditer(r"^(" + ALGO_TABLE + r")\s*=",
                                                           r.preset_text(preset), re.M)}
        base = set_keys(r.preset_text(preset), {**values, **fixed, **tables})
        preds = {}
        with tempfile.TemporaryDirectory() as tmp:
            for tag in [None] + knobs:
                path = os.path.join(tmp, f"{tag}.params")
                with open(path, "w") as f:
                    f.write(set_keys(base, {tag: fixed[tag] + 100.0}) if tag else base)
                preds[tag] = r.topo(path, np, COLLS, args.sync_sizes)
        return {k: (preds[None][k], [(preds[t][k] - preds[None][k]) / 100 for t in knobs])
                for k in preds[None]}

    def fit_points(got, coefs, knobs, label):
        feats, times, keys = [], [], []
        for key, ts in sorted(got.items()):
            rest, ks = coefs[key]
            t = median(ts)
            if t > rest:
                feats.append(ks)
                times.append(t - rest)
                keys.append((key, t, rest))
        x, _ = relative_fit(feats, times)
        say(f"# {'collective':<21} {'algorithm':<9} {'size(B)':>8} {'measured':>9} {'fit':>9}")
        errs = []
        for ((c, algo, s), t, rest), fs in zip(keys, feats):
            fit = rest + sum(a * b for a, b in zip(fs, x))
            errs.append(fit / t - 1)
            say(f"  {c:<21} {algo:<9} {s:>8} {t:>9.2f} {fit:>9.2f}")
        rms = math.sqrt(sum(e * e for e in errs) / max(1, len(errs)))
        say(f"# fit: {', '.join(f'{k} {v:.2f}' for k, v in zip(knobs, x))} "
            f"(rms {100 * rms:.0f}% over {len(errs)} points, {label})")
        return x

    measured_points = {}  # np: the calibration points, for the algorithm tables
    np = args.sync_np
    got = measured_points[np] = calibration_points(np, "sync")
    knobs = ["call_overhead_us", "sync_us"]
    coefs = coefficients(np, {"call_overhead_us": 0.0, "sync_us": 0.0, "oversubscribed_sync_us": 0.0}, knobs)
    o, sigma = fit_points(got, coefs, knobs, f"np {np}")
    values["call_overhead_us"] = o
    values["sync_us"] = sigma
    cal_points = f"np {np}"
    # One value per count, each fitted through the generic knob (the count's own key held
    # at 0, unset, so that the knob is what the model uses there); the largest count's
    # value becomes the generic one, the others go to their own keys.
    for i, onp in enumerate(args.oversub_np if emu else []):
        got = measured_points[onp] = calibration_points(onp, "oversub")
        knobs = ["oversubscribed_sync_us"]
        fixed = {"call_overhead_us": o, "sync_us": sigma, "oversubscribed_sync_us": 1e-6}
        if 3 <= onp <= 8:
            fixed[f"oversubscribed_sync.np{onp}_us"] = 0.0
        coefs = coefficients(onp, fixed, knobs)
        (fitted,) = fit_points(got, coefs, knobs, f"np {onp}")
        if i == 0:
            values["oversubscribed_sync_us"] = fitted
        elif 3 <= onp <= 8:
            values[f"oversubscribed_sync.np{onp}_us"] = fitted
        cal_points += f" and np {onp}"

    # The same points as measured (algo.np<L>.<coll>.<algo>.table_us): a one-node call of
    # that algorithm takes its time from them up to their largest size, and beyond it adds
    # what the formulas add (the fitted handshakes above serve the counts not measured).
    for np, got in sorted(measured_points.items()):
        if 2 <= np <= 8:
            for (coll, algo) in sorted({(c, a) for c, a, _ in got}):
                pts = sorted((s, median(ts)) for (c, a, s), ts in got.items() if (c, a) == (coll, algo))
                values[f"algo.np{np}.{coll}.{algo}.table_us"] = " ".join(f"{s}:{t:.4g}" for s, t in pts)
    say(f"# algo.np<L>.<coll>.<algo>.table_us: the calibration points' medians, L = "
        f"{','.join(str(n) for n in sorted(measured_points) if 2 <= n <= 8)}")

    # 4. the file: per-rank-count values the starting point had (a params file) and this
    # run did not measure are dropped (their lines left out: unset), not carried over as if measured.
    for line in r.preset_text(preset).splitlines():
        key = line.split("=", 1)[0].strip()
        if key not in values and any(re.fullmatch(p, key) for p, _ in PER_COUNT_KEYS):
            values[key] = None
    name = args.name or f"{preset}-calibrated"
    loads = ", ".join(f"{x:.2f}" for x in r.loads)
    values["name"] = name
    values["source"] = (
        f"contrib/calibrate.py on {host}, {stamp}, device {r.device}, {r.cores} cores, from preset {preset}: "
        f"gpucoll_kernel_bench x{procs} (device, staging, cache), Open MPI host collectives np "
        f"{','.join(map(str, args.host_np))} (host*), python shared-memory writes (shared_write_GBps), "
        f"accelerated algorithms {cal_points} at {','.join(human(s) for s in args.sync_sizes)} "
        f"(call_overhead_us, sync_us, oversubscribed_sync_us); medians of {args.reps}; "
        f"load before batches {loads}")
    text = set_keys(r.preset_text(preset), values)
    say("\n## measured")
    width = max(len(k) for k in values)
    for k in sorted(values):
        if k in ("name", "source") or values[k] is None:
            continue
        v = values[k]
        say(f"  {k:<{width}} = {v:.4g}" if isinstance(v, float) else f"  {k:<{width}} = {v}")
    say(f"# {r.runs} runs; {r.disturbed} repeated because other processes used the CPUs, "
        f"{r.kept_disturbed} kept disturbed; {r.gave_up} batches started with the load above {args.max_load}")
    say("# commands, one of each kind:")
    for what, cmd in r.commands:
        say(f"#   {what}: {cmd}")
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        say(f"# wrote {args.output}")
    else:
        say("\n" + text)


if __name__ == "__main__":
    main()

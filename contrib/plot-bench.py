#!/usr/bin/env python3
"""Plots gpucoll_bench result files (gpucoll_bench --csv, contrib/bench.sh).

    contrib/plot-bench.py [options] FILE.csv [FILE.csv ...]

For every collective: latency against size and bus bandwidth against size
(log-log), one line per variant (contrib/bench.sh's labels: emu:staged,
emu:auto, host,gpucoll, host,off, ...), named with the path and algorithms
that gpucoll's counters reported. Staged runs are drawn dashed and host
buffers (component on: dotted grey, off: dotted black) as baselines. Rows
of the same variant and size (repeats, several files) are reduced to their
median, as in bench.sh's comparison tables; the latency plotted is
lat_avg_us (the tables' avg: the mean over ranks of each rank's mean
latency), the bandwidth busbw_GBps (nccl-tests' bus bandwidth).

Writes PREFIX<coll>-latency.png and PREFIX<coll>-busbw.png into the output
directory (-o, default: the first file's), with -npN (and -Nnodes) before
-latency where one collective has several rank counts; prints each path.
matplotlib comes from python3 or from contrib/plot-deps.sh's virtual
environment, which is made when missing (--no-install: never); exit status
3 when matplotlib cannot be had, 2 on bad input.
"""

import argparse
import csv
import io
import os
import re
import statistics
import subprocess
import sys

COLUMNS_NEEDED = ("collective", "bytes", "variant", "ranks", "path", "algorithm")
NO_MATPLOTLIB = 3


def load_matplotlib(allow_install):
    """Imports matplotlib, or re-runs this script under contrib/plot-deps.sh's python."""
    try:
        import matplotlib  # noqa: F401

        return
    except ImportError:
        pass
    if os.environ.get("GPUCOLL_PLOT_REEXEC"):
        sys.exit(f"plot-bench: {sys.executable} has no matplotlib")
    helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot-deps.sh")
    args = [helper] + ([] if allow_install else ["--no-install"])
    try:
        out = subprocess.run(args, stdout=subprocess.PIPE, text=True, check=False)
    except OSError as e:
        print(f"plot-bench: cannot run {helper}: {e}", file=sys.stderr)
        sys.exit(NO_MATPLOTLIB)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        print("plot-bench: no matplotlib (contrib/plot-deps.sh said why above)", file=sys.stderr)
        sys.exit(NO_MATPLOTLIB)
    python = lines[-1]
    env = dict(os.environ, GPUCOLL_PLOT_REEXEC="1")
    os.execve(python, [python, os.path.abspath(__file__)] + sys.argv[1:], env)


def read_rows(path):
    """Rows of one result file as dicts; lines starting with '#' are comments."""
    with open(path, newline="", encoding="utf-8") as f:
        text = "".join(line for line in f if not line.startswith("#"))
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS_NEEDED if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path}: not a gpucoll_bench result file (no column {', '.join(missing)})")
    rows = []
    for n, row in enumerate(reader, start=2):
        try:
            row["bytes"] = int(row["bytes"])
            row["ranks"] = int(row["ranks"])
        except (TypeError, ValueError):
            raise ValueError(f"{path}: row {n}: bytes and ranks must be integers") from None
        rows.append(row)
    return rows


def number(row, key):
    """The float in a column, or None when it is empty or missing."""
    v = (row.get(key) or "").strip()
    try:
        return float(v) if v else None
    except ValueError:
        return None


def human_bytes(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return str(b)


class Series:
    """One line: the rows of one variant (and run settings) in one figure."""

    def __init__(self, key):
        self.key = key
        self.lat = {}  # bytes -> [lat_avg_us of each row]
        self.busbw = {}
        self.taken = {}  # bytes -> [path/algorithm of each row]
        self.paths = set()
        self.mixed = False

    def add(self, row):
        b = row["bytes"]
        lat = number(row, "lat_avg_us")
        if lat is None:
            lat = number(row, "lat_median_us")
        if lat is not None:
            self.lat.setdefault(b, []).append(lat)
        bw = number(row, "busbw_GBps")
        if bw is not None:
            self.busbw.setdefault(b, []).append(bw)
        path, alg = row["path"], row["algorithm"]
        self.paths.add(path)
        self.taken.setdefault(b, []).append(alg if alg and alg != path else path)
        if (row.get("paths_agree") or "yes") == "no":
            self.mixed = True

    def points(self, which):
        data = self.lat if which == "latency" else self.busbw
        xs = sorted(b for b, v in data.items() if statistics.median(v) > 0)
        return xs, [statistics.median(data[b]) for b in xs]

    def algorithms(self):
        """'one_shot; two_shot from 32K': what was taken, in size order."""
        parts, last = [], None
        for b in sorted(self.taken):
            names = sorted(set(self.taken[b]))
            name = "|".join(names)
            if name != last:
                parts.append(name if last is None else f"{name} from {human_bytes(b)}")
                last = name
        return "; ".join(parts)

    def style(self):
        """Line style: baselines (staged, host buffers) apart from the device paths."""
        if self.paths == {"off"}:
            return dict(color="black", linestyle=":", marker="x", zorder=1)
        if self.paths == {"delegated"}:
            return dict(color="0.55", linestyle=":", marker="+", zorder=1)
        if self.paths == {"staged"}:
            return dict(color="0.35", linestyle="--", marker="s", markersize=3.5, zorder=2)
        return dict(linestyle="-", marker="o", markersize=3.5, zorder=3)

    def label(self, extra):
        variant = self.key[0]
        if self.paths == {"off"}:
            what = "component off"
        elif self.paths == {"delegated"}:
            what = "component on, delegated"
        else:
            what = self.algorithms()
        text = f"{variant}{extra} ({what})"
        return text + (" (ranks disagreed*)" if self.mixed else "")


SETTINGS = ("datatype", "op", "form", "in_place")


def figures(rows):
    """{(collective, ranks, nodes): [rows]}, in first-seen order."""
    out = {}
    for row in rows:
        key = (row["collective"], row["ranks"], (row.get("nodes") or "").strip())
        out.setdefault(key, []).append(row)
    return out


def describe(rows, column):
    values = []
    for row in rows:
        v = (row.get(column) or "").strip()
        if v and v not in values:
            values.append(v)
    return values


def plot_figure(plt, ticker, rows, title, which, path, note):
    series = {}
    for row in rows:
        key = (row["variant"],) + tuple((row.get(s) or "") for s in SETTINGS)
        series.setdefault(key, Series(key)).add(row)
    # settings that differ between the lines go into their labels
    differ = [i for i, s in enumerate(SETTINGS) if len({k[1 + i] for k in series}) > 1]
    fig, ax = plt.subplots(figsize=(8, 5.2), dpi=100)
    drawn = 0
    for key, s in series.items():
        xs, ys = s.points(which)
        if not xs:
            continue
        extra = "".join(f", {SETTINGS[i]} {key[1 + i] or '-'}" for i in differ)
        ax.plot(xs, ys, label=s.label(extra), linewidth=1.4, **s.style())
        drawn += 1
    if not drawn:
        plt.close(fig)
        return False
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(ticker.NullLocator())
    sizes = sorted({r["bytes"] for r in rows})
    ticks = [b for b in sizes if (b.bit_length() - 1) % 2 == 0] if len(sizes) > 12 else sizes
    ax.set_xticks(ticks)
    ax.set_xticklabels([human_bytes(b) for b in ticks], rotation=45, fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("message size (bytes)")
    if which == "latency":
        ax.set_ylabel("latency (us, mean over ranks)")
    else:
        ax.set_ylabel("bus bandwidth (GB/s, nccl-tests)")
    ax.grid(True, which="major", linewidth=0.4, alpha=0.6)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left" if which == "latency" else "lower right")
    fig.text(0.01, 0.01, note, fontsize=6, color="0.35", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 2)[2],
    )
    ap.add_argument("files", nargs="+", metavar="FILE", help="result files (CSV)")
    ap.add_argument("-o", "--outdir", help="where the PNGs go (default: the first file's directory)")
    ap.add_argument("-p", "--prefix", default="", help="file name prefix, e.g. emu-")
    ap.add_argument("-t", "--title", default="", help="put before each title, e.g. 'H100, MPS'")
    ap.add_argument("-c", "--collective", action="append", help="only this collective (repeatable)")
    ap.add_argument("-n", "--ranks", type=int, action="append", help="only this rank count (repeatable)")
    ap.add_argument("--include", help="only variants that match this regular expression")
    ap.add_argument("--exclude", help="no variant that matches this regular expression")
    ap.add_argument("--no-install", action="store_true", help="never install matplotlib")
    args = ap.parse_args()

    rows = []
    try:
        for f in args.files:
            rows += read_rows(f)
    except (OSError, ValueError, csv.Error) as e:
        print(f"plot-bench: {e}", file=sys.stderr)
        return 2
    if args.collective:
        rows = [r for r in rows if r["collective"] in args.collective]
    if args.ranks:
        rows = [r for r in rows if r["ranks"] in args.ranks]
    try:
        if args.include:
            rows = [r for r in rows if re.search(args.include, r["variant"])]
        if args.exclude:
            rows = [r for r in rows if not re.search(args.exclude, r["variant"])]
    except re.error as e:
        print(f"plot-bench: bad regular expression: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("plot-bench: no rows to plot (after the filters)", file=sys.stderr)
        return 2

    load_matplotlib(not args.no_install)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    outdir = args.outdir or os.path.dirname(os.path.abspath(args.files[0]))
    os.makedirs(outdir, exist_ok=True)
    groups = figures(rows)
    written = 0
    for (coll, ranks, nodes), grows in groups.items():
        # -npN where the collective has several rank counts, -Mnodes where one has several node counts
        name = args.prefix + coll
        if len({g[1:] for g in groups if g[0] == coll}) > 1:
            name += f"-np{ranks}"
            if len({g[2] for g in groups if g[:2] == (coll, ranks)}) > 1:
                name += f"-{nodes or 'unknown'}nodes"
        where = f"np {ranks}" + (f", {nodes} node{'s' if nodes != '1' else ''}" if nodes else "")
        backends = "/".join(describe(grows, "backend"))
        # rows per line and size: repeats, reduced to their median here
        repeats = {}
        for r in grows:
            k = (r["variant"], r["bytes"]) + tuple(r.get(s) or "" for s in SETTINGS)
            repeats[k] = repeats.get(k, 0) + 1
        n = max(repeats.values())
        what = f"median of {n} runs" if n > 1 else ""
        runs = describe(grows, "runs")  # rows that are already medians (transcribed tables)
        if runs and runs != ["1"]:
            what = "medians of " + " or ".join(runs) + " runs"
        title_head = (args.title + "\n" if args.title else "") + f"{coll}, {where}"
        note = "; ".join(
            x
            for x in (
                "gpucoll " + " ".join(describe(grows, "version") + describe(grows, "commit")),
                ", ".join(dict.fromkeys(d[:10] for d in describe(grows, "date"))),
                "host " + ", ".join(describe(grows, "host")) if describe(grows, "host") else "",
                "; ".join(describe(grows, "source")),
            )
            if x.strip() and x.strip() != "gpucoll"
        )
        details = ", ".join(x for x in (f"{backends} buffers" if backends else "", what) if x)
        for which, label in (("latency", "latency"), ("busbw", "bus bandwidth")):
            title = f"{title_head}: {label}" + (f" ({details})" if details else "")
            out = os.path.join(outdir, f"{name}-{which}.png")
            if plot_figure(plt, ticker, grows, title, which, out, note):
                print(out)
                written += 1
    if not written:
        print("plot-bench: nothing to plot (no latency or bandwidth figures)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

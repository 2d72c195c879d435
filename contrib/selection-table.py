#!/usr/bin/env python3
"""contrib/selection-table.py - a measured selection table for
coll_gpucoll_selection_file (docs/tuning.md) from a calibration: the
comparison tables of contrib/bench.sh (the calibrate*.txt files of
contrib/gpu-run.sh calibrate, or bench.sh's comparison.txt) or its CSV
result files (results.csv, runs/*.csv).

  contrib/selection-table.py [-o TABLE] [--sharing MODE] [--hysteresis 0.05] FILE...
  contrib/selection-table.py --check TABLE [--limit 1.10] FILE...

For each collective, rank count and sharing mode, and each measured size,
the fastest measured column wins, with hysteresis: going up in size the
current choice stays unless another is more than --hysteresis (5%) faster
there, and a choice that wins at a single size between two sizes of
another choice is absorbed when that choice is within --absorb (8%) there;
ranges of one choice are merged. A time is the one of the algorithm that
ran (the "path/algorithm taken" column: a one_shot column that ran two_shot
counts for two_shot); columns of several files (or repeats in CSV files)
for the same algorithm and size are reduced to their median; gpucoll's own
"auto" column is left out. Range boundaries: a choice covers its sizes up to
the last one measured for it, the next choice starts one byte above; the
first starts at 0, the last has no end.

The sharing mode of a file's rows: --sharing, else from the file name
("-mps" shared-mps, "-nomps" shared-no-mps), else "*" (any).

--check TABLE: how far the table's choice is from the fastest column at
every measured size of FILE... (the check of a table against the data it
came from, or against a new measurement); one line per collective, rank
count and sharing mode; exit status 1 when some size exceeds --limit.
"""
import argparse
import csv
import datetime
import os
import re
import statistics
import sys

INF = None
SHARING = ("gpu-per-rank", "shared-mps", "shared-no-mps", "*")
COLLS = ("allreduce", "bcast", "allgather", "reduce_scatter", "reduce_scatter_block", "reduce")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def human(n):
    if n is INF:
        return "inf"
    for u in ("T", "G", "M", "K"):
        if n and n % UNITS[u] == 0:
            return f"{n // UNITS[u]}{u}"
    return str(n)


def human_size(n):
    for u in ("G", "M", "K"):
        if n >= UNITS[u] and n % UNITS[u] == 0:
            return f"{n // UNITS[u]} {u}iB"
    return f"{n} B"


def sharing_of(path, forced):
    if forced:
        return forced
    base = os.path.basename(path)
    if re.search(r"-nomps\b", base):
        return "shared-no-mps"
    if re.search(r"-mps\b", base):
        return "shared-mps"
    return "*"


def taken_algo(taken):
    """'accelerated/two_shot' -> two_shot; 'staged/staged' -> staged; the first of several."""
    first = taken.split("|")[0]
    path, _, algo = first.partition("/")
    if path == "staged":
        return "staged"
    if path == "accelerated" and algo:
        return algo
    return None


def read_comparison(path, sharing, samples, backends):
    cur = None
    for line in open(path, encoding="utf-8"):
        if not line.strip():  # a table ends at a blank line (logs go on with other rows)
            cur = None
        elif line.startswith("# comparison:"):
            m = re.match(r"# comparison: (\S+), np (\d+)([^,]*), (\w+),", line)
            cur = None
            if m and "fake nodes" not in m.group(3):
                cur = {"coll": m.group(1), "np": int(m.group(2)), "labels": []}
                backends.add(m.group(4))
        elif cur is not None and line.startswith("#   size"):
            cur["labels"] = re.findall(r"\S+:(\w+)(?=\s+path)", line)
        elif cur is not None and re.match(r"^\s+\d+\s", line):
            size = int(line.split()[0])
            cells = re.findall(r"([\d.]+) \(\s*[\d.]+\)\s+(\S+)", line)[: len(cur["labels"])]
            for label, (t, taken) in zip(cur["labels"], cells):
                algo = taken_algo(taken)
                if label == "auto" or algo is None or float(t) <= 0:
                    continue
                key = (cur["coll"], cur["np"], sharing)
                samples.setdefault(key, {}).setdefault(size, {}).setdefault(algo, []).append(float(t))


def read_csv(path, sharing, samples, backends):
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    for r in rows:
        variant = r.get("variant", "")
        if ":" not in variant or "@" in variant or r.get("nodes", "1") not in ("", "1"):
            continue
        label = variant.split(":", 1)[1].strip()
        algo = taken_algo(f"{r.get('path', '')}/{r.get('algorithm', '')}")
        if label == "auto" or algo is None or not r.get("lat_avg_us"):
            continue
        backends.add(r.get("backend", ""))
        key = (r["collective"], int(r["ranks"]), sharing)
        samples.setdefault(key, {}).setdefault(int(r["bytes"]), {}).setdefault(algo, []).append(
            float(r["lat_avg_us"]))


def read_all(files, forced_sharing):
    samples, backends = {}, set()
    for path in files:
        sharing = sharing_of(path, forced_sharing)
        with open(path, encoding="utf-8") as f:
            head = f.readline()
        if head.startswith("collective,") or path.endswith(".csv"):
            read_csv(path, sharing, samples, backends)
        else:
            read_comparison(path, sharing, samples, backends)
    # median per algorithm and size
    data = {k: {s: {a: statistics.median(v) for a, v in cols.items()} for s, cols in sizes.items()}
            for k, sizes in samples.items()}
    return data, backends


def choose(sizes, hysteresis, absorb):
    """[(size, algo)] for sorted sizes: the fastest, with hysteresis and absorption."""
    picks, cur = [], None
    for s in sorted(sizes):
        cols = sizes[s]
        best = min(cols, key=cols.get)
        if cur not in cols or cols[cur] > (1 + hysteresis) * cols[best]:
            cur = best
        picks.append([s, cur])
    # A single size between two sizes of another choice: absorbed where that one is close.
    for i in range(1, len(picks) - 1):
        before, after = picks[i - 1][1], picks[i + 1][1]
        cols = sizes[picks[i][0]]
        if before == after != picks[i][1] and before in cols and \
                cols[before] <= (1 + absorb) * min(cols.values()):
            picks[i][1] = before
    return picks


def ranges_of(picks):
    out, start = [], 0
    for i, (s, a) in enumerate(picks):
        if i + 1 < len(picks) and picks[i + 1][1] == a:
            continue
        last = i + 1 == len(picks)
        out.append((start, INF if last else s, a, picks[[p[1] for p in picks].index(a, 0)][0], s))
        start = s + 1
    # first measured size of each range, for the comment
    fixed, first = [], picks[0][0]
    for i, (lo, hi, a, _, last_size) in enumerate(out):
        fixed.append((lo, hi, a, first, last_size))
        nxt = [p[0] for p in picks if p[0] > last_size]
        first = nxt[0] if nxt else None
    return fixed


def write_table(data, backends, args):
    lines = ["# gpucoll measured selection table (coll_gpucoll_selection_file, docs/tuning.md)",
             f"# written by contrib/selection-table.py {datetime.date.today().isoformat()} "
             f"(hysteresis {args.hysteresis:g}, absorb {args.absorb:g}) from:"]
    lines += [f"#   {p}" for p in args.files]
    backend = args.backend or (backends.pop() if len(backends) == 1 else "")
    if backend in ("emu", "cuda"):
        lines.append(f"backend {backend}")
    lines.append("# collective           ranks  sharing            from        to  algorithm")
    order = {c: i for i, c in enumerate(COLLS)}
    for (coll, np, sharing) in sorted(data, key=lambda k: (order.get(k[0], 99), k[1], k[2])):
        if coll not in order:
            continue
        for lo, hi, algo, first, last in ranges_of(choose(data[(coll, np, sharing)],
                                                          args.hysteresis, args.absorb)):
            lines.append(f"{coll:<22} {np:>5}  {sharing:<13} {human(lo):>9} {human(hi):>9}  "
                         f"{algo:<10} # chosen at {human_size(first)}"
                         + (f" to {human_size(last)}" if last != first else ""))
    text = "\n".join(lines) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def parse_size(word):
    if word in ("inf", "*"):
        return INF
    m = re.fullmatch(r"(\d+)([KMGT]?)(iB)?", word)
    if not m:
        raise ValueError(word)
    return int(m.group(1)) * UNITS[m.group(2)]


def read_table(path):
    rules = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        w = line.split("#")[0].split()
        if not w or w[0] == "backend":
            continue
        if len(w) != 6:
            sys.exit(f"{path}:{n}: expected 6 fields")
        ranks = [0] if w[1] == "*" else [int(x) for x in w[1].split(",")]
        for r in ranks:
            rules.append((w[0], r, w[2], parse_size(w[3]), parse_size(w[4]), w[5]))
    return rules


def lookup(rules, coll, np, sharing, size):
    for key in ((np, sharing), (np, "*"), (0, sharing), (0, "*")):
        mine = [r for r in rules if r[0] == coll and (r[1], r[2]) == key]
        if mine:
            for r in mine:
                if r[3] <= size and (r[4] is INF or size <= r[4]):
                    return r[5]
            return None
    return None


def check(data, args):
    rules = read_table(args.check)
    over = False
    for (coll, np, sharing) in sorted(data):
        sizes = data[(coll, np, sharing)]
        within, worst, bad, unmeasured = 0, None, [], []
        for s in sorted(sizes):
            cols = sizes[s]
            best = min(cols, key=cols.get)
            pick = lookup(rules, coll, np, sharing, s)
            if pick is None or pick == "auto" or pick not in cols:
                unmeasured.append(f"{s}:{pick or 'fallback'}")
                continue
            r = cols[pick] / cols[best]
            within += r <= args.limit
            if r > args.limit:
                bad.append(f"{s}:{r:.2f}({best})")
            if worst is None or r > worst[0]:
                worst = (r, s, pick, best)
        over = over or bool(bad)
        n = len(sizes) - len(unmeasured)
        worst_text = "" if worst is None else (
            f"; worst {worst[0]:.2f}x at {worst[1]} B ({worst[2]}"
            + (f" against {worst[3]})" if worst[2] != worst[3] else ", the fastest)"))
        print(f"{coll}, np {np}, {sharing}: {within} of {n} sizes within {args.limit:.2f}x of the "
              f"fastest{worst_text}"
              + (f"; over: {' '.join(bad)}" if bad else "")
              + (f"; not checked (the table's choice not measured): {' '.join(unmeasured)}"
                 if unmeasured else ""))
    return 1 if over else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("-o", "--output", help="write the table here (default: standard output)")
    ap.add_argument("--sharing", choices=SHARING, help="the sharing mode of every input file")
    ap.add_argument("--backend", choices=("emu", "cuda"),
                    help="the table's backend line (default: the one the inputs name)")
    ap.add_argument("--hysteresis", type=float, default=0.05)
    ap.add_argument("--absorb", type=float, default=0.08)
    ap.add_argument("--check", metavar="TABLE", help="check TABLE against the inputs instead")
    ap.add_argument("--limit", type=float, default=1.10)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    data, backends = read_all(args.files, args.sharing)
    if not data:
        sys.exit("selection-table.py: no comparison table or result row in the inputs")
    if args.check:
        return check(data, args)
    write_table(data, backends, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

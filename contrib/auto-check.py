#!/usr/bin/env python3
"""contrib/auto-check.py - how far gpucoll's own choice (the "auto" column) is
from the fastest column, size by size, in contrib/bench.sh comparison tables
(bench.sh output, or the calibrate*.txt files of contrib/gpu-run.sh).

  contrib/auto-check.py [--limit 1.10] FILE...

One line per table: the worst ratio auto / fastest and where, and every size
where auto is more than --limit times the fastest (the column that won in
parentheses). Exit status 1 when some size exceeds the limit.
"""
import argparse
import re
import sys


def tables(path):
    out, cur = [], None
    for line in open(path, encoding="utf-8"):
        if line.startswith("# comparison:"):
            m = re.match(r"# comparison: (\S+), (np \d+[^,]*)", line)
            cur = {"coll": m.group(1), "where": m.group(2), "labels": [], "rows": []}
            out.append(cur)
        elif cur is not None and line.startswith("#   size"):
            cur["labels"] = re.findall(r"\S+:(\w+)(?=\s+path)", line)
        elif cur is not None and re.match(r"^\s+\d+\s", line):
            size = int(line.split()[0])
            cols = re.findall(r"([\d.]+) \(\s*[\d.]+\)\s+(\S+)", line)[: len(cur["labels"])]
            if len(cols) == len(cur["labels"]):
                cur["rows"].append((size, [float(v) for v, _ in cols]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=float, default=1.10)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    over = False
    for path in args.files:
        for t in tables(path):
            if "auto" not in t["labels"]:
                continue
            a = t["labels"].index("auto")
            worst, bad = (1.0, 0, ""), []
            for size, vals in t["rows"]:
                best = min(vals)
                winner = t["labels"][vals.index(best)]
                r = vals[a] / best if best > 0 else 1.0
                if r > args.limit:
                    bad.append(f"{size}:{r:.2f}({winner})")
                if r > worst[0]:
                    worst = (r, size, winner)
            over = over or bool(bad)
            print(f"{path}: {t['coll']}, {t['where']}: worst auto/fastest {worst[0]:.2f} at "
                  f"{worst[1]} B ({worst[2]}); over {args.limit:.2f} at {len(bad)} of "
                  f"{len(t['rows'])} sizes{': ' if bad else ''}{' '.join(bad)}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())

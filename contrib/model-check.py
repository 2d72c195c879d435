#!/usr/bin/env python3
"""contrib/model-check.py - the cost model's predictions against measurement.

For every rank count, collective, algorithm of the one-node selection table
plus staged, and size, measures the time of a call with perf/gpucoll_bench
(the algorithm forced with --mca coll_gpucoll_<coll>_algorithm; one_shot with
its scratch slot raised to 64 MiB), the median of --reps repetitions run
interleaved (each repetition runs every np, collective and algorithm once),
asks `gpucoll_topo --model PARAMS` for the prediction, and prints a markdown
table (np, collective, algorithm, size, measured us, predicted us, ratio =
predicted / measured) and the summary line "K of M points within 25% (P%)".
A point whose run took another algorithm than the one forced is left out and
listed.

The machine must be quiet (see contrib/calibrate.py): the load average is
waited for before every repetition, the CPUs' idleness before every run, and
runs disturbed by other processes are repeated.

--save FILE keeps the measurements (JSON); --load FILE prints the table from
saved measurements without measuring (for another params file: say so when
you report it, the predictions were then not made blind).
"""

import datetime
import json
import os
import socket
import statistics
import sys

sys.dont_write_bytecode = True  # no __pycache__ in contrib/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibrate as cal  # noqa: E402  (contrib/calibrate.py: runner, parsers)


def main():
    ap = cal.parser(__doc__, """  contrib/model-check.py -b _build/model --params perf/emu-vm.params -r 3
  contrib/model-check.py --np 2 --colls allreduce --sizes 64K:4M -r 1
  contrib/model-check.py --load check.json --params other.params""")
    ap.add_argument("--params", default=os.path.join(cal.TOP, "perf", "emu-vm.params"),
                    help="params file or preset for the predictions (default perf/emu-vm.params)")
    ap.add_argument("--np", type=lambda s: cal.parse_list(s, int), default=[2, 3, 4], help="rank counts (default 2,3,4)")
    ap.add_argument("--sizes", type=cal.parse_range, default=cal.parse_range("64K:64M"), help="MIN:MAX, doubling (default 64K:64M)")
    ap.add_argument("--colls", type=cal.parse_list, default=cal.COLLS, help="collectives, comma list (default all six)")
    ap.add_argument("--algos", type=cal.parse_list, help="only these algorithms (default: the one-node table and staged)")
    ap.add_argument("-r", "--reps", type=int, default=3, help="repetitions, interleaved; the median is compared (default 3)")
    ap.add_argument("-T", "--time-cap", type=float, default=0.3, help="gpucoll_bench -T (default 0.3 s)")
    ap.add_argument("--tolerance", type=float, default=0.25, help="a point is within when |predicted/measured - 1| <= this (default 0.25)")
    cal.add_runner_args(ap, "repetition")
    ap.add_argument("--mpirun-args", help="extra mpirun arguments (one string)")
    ap.add_argument("--save", help="write the measurements to this JSON file")
    ap.add_argument("--load", help="read the measurements from this JSON file instead of measuring")
    ap.add_argument("-o", "--output", help="also write the markdown table to this file")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    args.build_given = args.build

    r = cal.Runner(args)
    sizes = set(args.sizes)
    plan = []  # (np, coll, algo)
    for np in args.np:
        for coll in args.colls:
            if coll not in cal.ONE_NODE:
                sys.exit(f"unknown collective {coll}")
            for algo in cal.ONE_NODE[coll] + ["staged"]:
                if args.algos is None or algo in args.algos:
                    plan.append((np, coll, algo))

    if args.load:
        with open(args.load) as f:
            saved = json.load(f)
        meta = saved["meta"]
        meas = {tuple(json.loads(k)): v for k, v in saved["times"].items()}
        other = {tuple(json.loads(k)): v for k, v in saved.get("other", {}).items()}
    else:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        cal.say(f"# contrib/model-check.py on {socket.gethostname()}, {stamp}: build {r.build}, "
                f"device {r.device}, {r.cores} cores, {len(plan)} runs x {args.reps} repetitions")
        meas, other = {}, {}
        for rep in range(args.reps):
            load = r.wait_load()
            cal.say(f"# repetition {rep + 1}/{args.reps}: load {load:.2f}")
            for np, coll, algo in plan:
                rows = r.bench(np, coll, args.sizes, args.time_cap, algo=algo, what="validation runs")
                for (c, s), (t, path, took) in rows.items():
                    key = (np, c, algo, s)
                    if took == algo or (algo == "staged" and path == "staged"):
                        meas.setdefault(key, []).append(t)
                    else:
                        other.setdefault(key, []).append(f"{path}/{took}")
        meta = {
            "host": socket.gethostname(), "date": stamp, "build": r.build, "device": r.device,
            "cores": r.cores, "reps": args.reps, "time_cap": args.time_cap,
            "loads": r.loads, "gave_up": r.gave_up, "disturbed": r.disturbed,
            "kept_disturbed": r.kept_disturbed, "runs": r.runs, "commands": r.commands,
        }
        if args.save:
            with open(args.save, "w") as f:
                json.dump({"meta": meta,
                           "times": {json.dumps(list(k)): v for k, v in meas.items()},
                           "other": {json.dumps(list(k)): v for k, v in other.items()}}, f, indent=1)

    preds = {}
    for np in sorted({p[0] for p in plan}):
        for (coll, algo, s), t in r.topo(args.params, np, sorted({p[1] for p in plan}), sorted(sizes)).items():
            preds[(np, coll, algo, s)] = t

    lines = []
    out = lines.append
    out(f"Measured: {meta['host']}, {meta['date']}, device {meta['device']}, {meta['cores']} cores, "
        f"median of {meta['reps']} interleaved repetitions (gpucoll_bench -T {meta['time_cap']}); "
        f"load before the repetitions {', '.join(f'{x:.2f}' for x in meta['loads'])}; "
        f"{meta['disturbed']} runs repeated for foreign CPU use, {meta['kept_disturbed']} kept disturbed. "
        f"Predicted: `gpucoll_topo --model {args.params}`.")
    out("")
    out("| np | collective | algorithm | size | measured us | spread | predicted us | ratio |")
    out("|---:|---|---|---:|---:|---:|---:|---:|")
    within = total = 0
    groups = {}
    for np, coll, algo in plan:
        for s in sorted(sizes):
            key = (np, coll, algo, s)
            if key not in meas or key not in preds:
                continue
            ts = meas[key]
            m = statistics.median(ts)
            p = preds[key]
            ratio = p / m
            ok = abs(ratio - 1) <= args.tolerance
            within += ok
            total += 1
            g = groups.setdefault((coll, algo), [0, 0, []])
            g[0] += ok
            g[1] += 1
            g[2].append(ratio)
            spread = max(ts) / min(ts)
            out(f"| {np} | {coll} | {algo} | {cal.human(s)} | {m:.1f} | {spread:.2f} | {p:.1f} | "
                f"{ratio:.2f}{'' if ok else ' *'} |")
    out("")
    out("ratio = predicted / measured; * outside the tolerance; spread = slowest / fastest repetition.")
    out("")
    out("| collective | algorithm | within | median ratio | min ratio | max ratio |")
    out("|---|---|---:|---:|---:|---:|")
    for (coll, algo), (k, n, rs) in groups.items():
        out(f"| {coll} | {algo} | {k}/{n} | {statistics.median(rs):.2f} | {min(rs):.2f} | {max(rs):.2f} |")
    per_np = {}
    for np, coll, algo in plan:
        for s in sorted(sizes):
            key = (np, coll, algo, s)
            if key in meas and key in preds:
                ok = abs(preds[key] / statistics.median(meas[key]) - 1) <= args.tolerance
                a = per_np.setdefault(np, [0, 0])
                a[0] += ok
                a[1] += 1
    out("")
    out("Per np: " + ", ".join(f"np {np}: {a[0]}/{a[1]}" for np, a in sorted(per_np.items())))
    if other:
        out("")
        out("Left out (another algorithm ran): " + ", ".join(
            f"np {k[0]} {k[1]} {k[2]} {cal.human(k[3])} -> {'/'.join(sorted(set(v)))}" for k, v in sorted(other.items())))
    out("")
    pct = 100.0 * within / total if total else 0.0
    out(f"{within} of {total} points within {100 * args.tolerance:.0f}% ({pct:.0f}%)")
    text = "\n".join(lines)
    print(text)
    if not args.load:
        print("# commands, one of each kind:")
        for what, cmd in meta["commands"]:
            print(f"#   {what}: {cmd}")
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

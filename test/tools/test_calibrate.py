#!/usr/bin/env python3
"""test_calibrate.py - contrib/calibrate.py without measuring (test/tools/calibrate.sh):

  1. the shared-write micro-benchmark leaves the caller's CPU affinity as it
     was (it pinned the calibration to one core once: every later
     oversubscribed run, which Open MPI leaves unbound, then shared it and
     measured twice the time);
  2. raw measurements survive --save / --load (tuple and integer keys,
     lists), and a section the file lacks is an error, not a measurement;
  3. --load of a small saved run (calibrate-mini.json: np 2 and 4, two
     repetitions) writes a params file gpucoll_topo reads, the same bytes
     each time, with the fitted per-count values, the host tables (the
     file's medians) and the file's machine facts; a file missing a section
     fails with its name.
Needs GPUCOLL_SRCDIR and GPUCOLL_BUILDDIR (part 3).
"""

import json
import re
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("GPUCOLL_SRCDIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("GPUCOLL_BUILDDIR")
sys.path.insert(0, os.path.join(SRC, "contrib"))
sys.dont_write_bytecode = True
import calibrate  # noqa: E402

SCRIPT = os.path.join(SRC, "contrib", "calibrate.py")
MINI = os.path.join(SRC, "test", "tools", "calibrate-mini.json")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def params_of(text):
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, v = (x.strip() for x in line.split("=", 1))
            out[k] = v
    return out


class Affinity(unittest.TestCase):
    def test_shared_write_keeps_affinity(self):
        before = os.sched_getaffinity(0)
        if len(before) < 2:
            self.skipTest("one CPU: nothing to narrow")
        extra = calibrate.shared_write_run(4096, 6, 2)
        self.assertEqual(os.sched_getaffinity(0), before)
        self.assertTrue(extra == extra)  # a number, not NaN
        copy = calibrate.cross_copy_run(65536, 5, 2)
        self.assertEqual(os.sched_getaffinity(0), before)
        self.assertGreater(copy, 0)

    def test_failed_writer_stops_all(self):
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("one CPU")
        # 2 rounds: each writer has no round to keep (the first 3 are warm-up) and fails.
        with self.assertRaises(SystemExit) as e:
            calibrate.shared_write_run(4096, 2, 2)
        self.assertIn("a process failed", str(e.exception))
        with self.assertRaises(ChildProcessError):  # every writer reaped, none left spinning
            os.waitpid(-1, os.WNOHANG)


class RawFile(unittest.TestCase):
    def test_round_trip(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "raw.json")
            runner = type("R", (), {"loads": [0.1], "runs": 3, "disturbed": 0, "kept_disturbed": 0,
                                    "gave_up": 0, "commands": [("what", "cmd")]})()
            raw = calibrate.Raw(save=path)
            raw.meta["cores"] = 2
            raw.put("kernel", {65536: [(10.0, 5.0)], 64: [(1.0, 0.5)]}, runner)
            raw.put("shared", [(4096, 0.25)], runner)
            raw.put("host", {(4, "allreduce", 8): [1.5, 1.25]}, runner)
            back = calibrate.Raw(load=path)
            self.assertEqual(back.meta["cores"], 2)
            self.assertEqual(back.meta["runs"], 3)
            self.assertEqual(back.get("kernel"), {65536: [[10.0, 5.0]], 64: [[1.0, 0.5]]})
            self.assertEqual(back.get("shared"), [[4096, 0.25]])
            self.assertEqual(back.get("host"), {(4, "allreduce", 8): [1.5, 1.25]})
            with self.assertRaises(SystemExit) as e:
                back.get("points.np3")
            self.assertIn("points.np3", str(e.exception))
            self.assertIsNone(calibrate.Raw().get("kernel"))  # not loading: measure


@unittest.skipUnless(BUILD, "GPUCOLL_BUILDDIR is not set")
class LoadSaved(unittest.TestCase):
    def load(self, src, *more):
        return subprocess.run([sys.executable, "-B", SCRIPT, "-b", BUILD, "--load", src, *more],
                              capture_output=True, text=True)

    def params_read_back(self, path):
        """The file as gpucoll_topo reads and writes it back: {key: value}."""
        back = subprocess.run([os.path.join(BUILD, "tools", "gpucoll_topo"), "--model", path, "--params"],
                              capture_output=True, text=True)
        self.assertEqual(back.returncode, 0, back.stderr)
        return params_of(back.stdout)

    def test_fit_from_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a.params"), os.path.join(tmp, "b.params")
            for out in (a, b):
                res = self.load(MINI, "-o", out)
                self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            with open(a) as fa, open(b) as fb:
                self.assertEqual(fa.read(), fb.read())
            p = self.params_read_back(a)
            meta = read_json(MINI)["meta"]
            self.assertEqual(float(p["cache_bytes"]), meta["llc"])
            self.assertEqual(float(p["shared_cores"]), meta["cores"])
            for key in ("sync_us", "call_overhead_us", "oversubscribed_sync_us",
                        "host.np4.allreduce.latency_us", "host.allreduce.bandwidth_GBps"):
                self.assertGreater(float(p[key]), 0.0, key)
            # Measured np 2 and 4 only: no handshake or host values of other counts.
            self.assertNotIn("host.np3.allreduce.latency_us", p)
            self.assertNotIn("host.np3.allreduce.table_us", p)
            # The host algorithm point by point: the medians of the file, np 2 and 4.
            host = calibrate.Raw(load=MINI).get("host")
            for np in (2, 4):
                want = [(s, calibrate.median(ts)) for (n, c, s), ts in sorted(host.items())
                        if n == np and c == "allreduce"]
                got = [tuple(float(x) for x in pt.split(":"))
                       for pt in p[f"host.np{np}.allreduce.table_us"].split()]
                self.assertEqual([s for s, _ in got], [s for s, _ in want])
                for (_, t), (_, w) in zip(got, want):
                    self.assertAlmostEqual(t, w, delta=1e-3 * w)
            # The calibration points as measured, per algorithm: np 2 and 4.
            raw = calibrate.Raw(load=MINI)
            for np, section in ((2, "points.sync.np2"), (4, "points.oversub.np4")):
                pts = raw.get(section)
                for coll, algo in {(c, a) for c, a, _ in pts}:
                    want = [(s, calibrate.median(ts)) for (c, a, s), ts in sorted(pts.items())
                            if (c, a) == (coll, algo)]
                    got = [tuple(float(x) for x in pt.split(":"))
                           for pt in p[f"algo.np{np}.{coll}.{algo}.table_us"].split()]
                    self.assertEqual([s for s, _ in got], [s for s, _ in want])
                    for (_, t), (_, w) in zip(got, want):
                        self.assertAlmostEqual(t, w, delta=1e-3 * w)
            self.assertFalse(any(k.startswith("algo.np3.") for k in p))
            self.assertIn(meta["date"], p["source"])

    def test_peer_cache_from_cross_copies(self):
        # Without cross-core copies (a run saved before them): unset. With copies whose rate
        # falls beyond a 16 MiB working set (2 processes x 2 x 4 MiB): that size.
        with tempfile.TemporaryDirectory() as tmp:
            plain = os.path.join(tmp, "plain.params")
            self.assertEqual(self.load(MINI, "-o", plain).returncode, 0)
            self.assertNotIn("peer_cache_bytes", self.params_read_back(plain))
            saved = read_json(MINI)
            procs = saved["meta"]["cores"]
            self.assertGreater(procs, 1)
            knee = 16 << 20
            pts = []
            for s in (2 << 20, 3 << 20, 4 << 20, 6 << 20, 8 << 20, 16 << 20, 32 << 20):
                ws, traffic = procs * 2 * s, 2 * s
                f = min(1.0, knee / ws)
                pts.append([s, traffic * (f / 40e3 + (1 - f) / 10e3)])  # 40 and 10 GB/s
            saved["data"]["cross"] = pts
            src = os.path.join(tmp, "cross.json")
            with open(src, "w") as f:
                json.dump(saved, f)
            out = os.path.join(tmp, "cross.params")
            res = self.load(src, "-o", out)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            p = self.params_read_back(out)
            self.assertAlmostEqual(float(p["peer_cache_bytes"]), knee, delta=0.1 * knee)
            self.assertLess(float(p["peer_cache_bytes"]), float(p["cache_bytes"]))

    def test_stale_tables_dropped(self):
        # A starting params file with np 3 values the saved run did not measure: not
        # carried over as if measured.
        with tempfile.TemporaryDirectory() as tmp:
            start = os.path.join(tmp, "start.params")
            with open(start, "w") as f:
                f.write("host.np3.allreduce.table_us = 8:1 1024:2\n"
                        "host.np3.allreduce.latency_us = 3\nhost.np3.allreduce.bandwidth_GBps = 2\n"
                        "algo.np3.allreduce.ring.table_us = 8:1000\n"
                        "algo.np4.allreduce.ring.table_us = 8:1000\n"
                        "algo.np2.bcast.chain.table_us = 8:1000\n")
            out = os.path.join(tmp, "out.params")
            res = self.load(MINI, "--preset", start, "-o", out)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            with open(out) as f:
                text = f.read()
            self.assertNotIn("host.np3.allreduce.table_us", text)
            self.assertIn("host.np4.allreduce.table_us", text)
            self.assertFalse(any(k.startswith("host.np3.allreduce") for k in self.params_read_back(out)))
            # Its algorithm tables neither stay nor move the fit (the fit asks the formulas).
            self.assertNotIn("algo.np3.", text)
            plain = os.path.join(tmp, "plain.params")
            self.assertEqual(self.load(MINI, "-o", plain).returncode, 0)
            fitted, p = self.params_read_back(out), self.params_read_back(plain)
            for key in ("sync_us", "call_overhead_us", "oversubscribed_sync_us",
                        "algo.np4.allreduce.ring.table_us", "algo.np2.bcast.chain.table_us"):
                self.assertEqual(fitted[key], p[key], key)

    def test_group_comment_follows_its_keys(self):
        # A starting file (an earlier output) whose only algorithm tables are dropped now:
        # their group comment goes with them, and the tables measured now get one, once.
        with tempfile.TemporaryDirectory() as tmp:
            plain = os.path.join(tmp, "plain.params")
            self.assertEqual(self.load(MINI, "-o", plain).returncode, 0)
            with open(plain) as f:
                lines = f.read().splitlines()
            marker = "# an accelerated algorithm on one node"
            self.assertEqual(sum(line.startswith(marker) for line in lines), 1)
            start_lines = []
            for line in lines:
                if re.match(r"algo\.np[2-8]\.", line):
                    continue  # the measured tables out...
                start_lines.append(line)
                if line.startswith(marker):  # ...and one this run does not measure in
                    start_lines.append("algo.np3.allreduce.ring.table_us = 8:1000")
            start = os.path.join(tmp, "start.params")
            with open(start, "w") as f:
                f.write("\n".join(start_lines) + "\n")
            out = os.path.join(tmp, "out.params")
            res = self.load(MINI, "--preset", start, "-o", out)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            with open(out) as f:
                got = f.read().splitlines()
            self.assertNotIn("algo.np3.allreduce.ring.table_us = 8:1000", got)
            at = [i for i, line in enumerate(got) if line.startswith(marker)]
            self.assertEqual(len(at), 1, "the group's comment once")
            self.assertRegex(got[at[0] + 1], r"^algo\.np[2-8]\.\w+\.\w+\.table_us = ")

    def test_load_and_save_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            res = self.load(MINI, "--save", os.path.join(tmp, "x.json"))
            self.assertEqual(res.returncode, 2)
            self.assertIn("nothing new to --save", res.stderr)

    def test_missing_section(self):
        with tempfile.TemporaryDirectory() as tmp:
            saved = read_json(MINI)
            del saved["data"]["points.oversub.np4"]
            src = os.path.join(tmp, "cut.json")
            with open(src, "w") as f:
                json.dump(saved, f)
            res = self.load(src, "-o", os.path.join(tmp, "x.params"))
            self.assertNotEqual(res.returncode, 0)
            self.assertIn("points.oversub.np4", res.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "x.params")))


if __name__ == "__main__":
    unittest.main(verbosity=2)

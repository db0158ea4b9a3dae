"""Performance regression check: this tree against an earlier commit, measured in one run.

From the repository root::

    python -m benchmarks.regression --base HEAD~1

Three benchmarks, run by both code bases, each in interpreters that import ``ntnumba`` from
their own tree (``PYTHONPATH``), the two sides taking turns (base, head, head, base, ...),
``--repeat`` figures per side and benchmark (default 3) of which the medians are compared:

* ``iteration``: one iteration (Stages 1-3) of the paper's algorithm at the COIL-20 size
  (n = 1440, N = 500, M = 2100, Cd = 20, Cs = 2) composed of the public kernels
  (``ntnumba.kernels``: ``assign``, ``update_theta``, ``update_transform``) as a fit runs it
  (pruned Stage 1, ``X^T X`` and the Stage-3 workspace kept between iterations, one BLAS
  thread), from the state of a one-iteration ``assign="objective"`` fit and one more
  iteration; a figure is the faster of the next two iterations;
* ``default fit``: ``NTClustering(20, random_state=0).fit`` on the shipped demo data
  (``ntnumba.datasets.load_demo()``, 1440 x 1024), once;
* ``first call``: the first default fit (``NTClustering(3, random_state=0)``) on small blobs
  (200 x 8) in a fresh interpreter with an empty numba cache (``NUMBA_CACHE_DIR``): mostly the
  compilation of every kernel the fit calls, which runs on one thread; its processor time
  (user + system, of every thread of the interpreter) is compared, which other jobs on the
  machine change less than the time on the clock (the JSON file has both).

In each turn of a side a fresh worker interpreter sets the first two up (the fit of the
iteration's state and one iteration; a default fit of a quarter of the data: the kernels
compiled or loaded from numba's cache; untimed) and gives one figure of each: a figure per
interpreter, as the speed of one process can differ from another's for reasons of its own.
The base's workers share a numba cache of their own (the first compiles); the head's use the
environment's (the working tree's, which the tests have filled in CI).

The check fails (exit status 1) when a head median is more than ``--factor`` (default 1.5)
times the base's. The factor is set above the spread of the check of a tree against itself:
HEAD against HEAD, six runs of ``--repeat 3`` on a 2-core machine shared with other jobs
(load average 1 to 6), gave ratios from 0.91 to 1.14 (iteration), 0.97 to 1.02 (default
fit) and 0.96 to 1.05 (first call, processor time; four runs: on the clock, two runs under
load 4-6 gave 1.29 and 1.35). The check took 130-140 s at load 1-2 and 215-350 s at load 4-6.

The base is the commit ``--base`` names (``git archive`` into a temporary folder); the head is
the working tree this file belongs to (``--head REV``: that commit instead). A benchmark the
base cannot run (no such commit, as for the first commit or in a shallow clone; no
``ntnumba`` package there; an import or a call that fails in the base) is reported as
skipped: skipped benchmarks do not fail the check. A benchmark the head cannot run does.
"""
import argparse
import io
import json
import os
import queue
import statistics
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: seconds a benchmark may take before it counts as failed
TIMEOUT = 1200

#: (name, what the figure is) in the order of the table
BENCHMARKS = [
    ("iteration", "one iteration, COIL-20 size (s)"),
    ("default fit", "NTClustering(20).fit(load_demo()) (s)"),
    ("first call", "first default fit, empty numba cache (CPU s)"),
]

# The runtime worker. It reads benchmark names on stdin, one a line ("setup NAME": set the
# benchmark up, untimed), and answers each with one JSON line on stdout: {"seconds": ...} or
# {"error": ...}. Its first line is {"file": ntnumba.__file__} (None when the import fails).
_WORKER = r"""
import json, sys, time, traceback

def iteration_setup():
    import dataclasses
    import numpy as np
    from threadpoolctl import threadpool_limits
    from ntnumba import NTClustering
    from ntnumba.datasets import load_demo
    from ntnumba.kernels import assign, transform_statistics, update_theta, update_transform
    X, _ = load_demo("paper")
    lam0 = lam1 = 0.03
    lam_a, lam_e = 1.0, 1e-3
    w = 1.0 + lam_a
    m = NTClustering(20, n_components=2100, n_similarity=2, assign="objective",
                     init="k-means++", max_iter=1, tol=0, random_state=0).fit(X)
    X = np.ascontiguousarray(X * m.scale_)
    s = {"A": m.components_, "tau": m.dissimilarity_, "nu": m.similarity_, "Q": None,
         "stats": None, "ws": {}}

    def one():
        # as a fit runs it: X^T X and what update_transform keeps in its workspace are
        # computed once, Q of the new A serves the next Stage 1
        A, tau, nu = s["A"], s["tau"], s["nu"]
        Q = X @ A.T if s["Q"] is None else s["Q"]
        lab, sim, Y, _, det = assign(Q, tau, nu, lam0, lam1, lambda_a=lam_a,
                                     return_details=True, prune=True)
        tau, nu = update_theta(Q, Y, lab, sim, tau, nu, lambda0=lam0, lambda_a=lam_a,
                               lambda_e=lam_e, cost=det["cost"])
        Ybar = (Y + lam_a * (tau[lab] + nu[sim])) / w
        if s["stats"] is None:
            stats = transform_statistics(X, Ybar)
        else:
            stats = dataclasses.replace(s["stats"], cross=Ybar.T @ X,
                                        target_sq=float(np.vdot(Ybar, Ybar)))
        A = update_transform(A=A, stats=stats, workspace=s["ws"], lambda2=16.0 / w,
                             lambda3=16.0 / w, lambda4=16.0 / w, n_steps=1)
        s.update(A=A, tau=tau, nu=nu, Q=X @ A.T, stats=stats)

    def run():
        times = []
        with threadpool_limits(limits=1, user_api="blas"):   # the fit's BLAS policy
            for _ in range(2):
                t = time.perf_counter()
                one()
                times.append(time.perf_counter() - t)
        return min(times)
    with threadpool_limits(limits=1, user_api="blas"):
        one()   # the workspace of update_transform and the statistics of X
    return run

def default_fit_setup():
    from ntnumba import NTClustering
    from ntnumba.datasets import load_demo
    X, _ = load_demo()
    NTClustering(20, random_state=0).fit(X[::4])   # compiles or loads the kernels

    def run():
        t = time.perf_counter()
        NTClustering(20, random_state=0).fit(X)
        return time.perf_counter() - t
    return run

SETUP = {"iteration": iteration_setup, "default fit": default_fit_setup}
ready = {}
try:
    import ntnumba
    where = ntnumba.__file__
except Exception:
    where = None
print(json.dumps({"file": where}), flush=True)
for line in sys.stdin:
    name = line.strip()
    setup = name.startswith("setup ")
    name = name[6:] if setup else name
    try:
        if name not in ready:
            ready[name] = SETUP[name]()
        out = {"seconds": 0.0 if setup else ready[name]()}
    except Exception as exc:
        out = {"error": traceback.format_exception_only(type(exc), exc)[-1].strip()}
    print(json.dumps(out), flush=True)
"""

# The first-call benchmark: a fresh interpreter, an empty NUMBA_CACHE_DIR set by the caller;
# its last line on stdout is {"file": ..., "seconds": processor seconds, "wall": seconds} or
# {"file": ..., "error": ...}.
_FIRST_CALL = r"""
import json, time, traceback
out = {"file": None}
try:
    import ntnumba
    out["file"] = ntnumba.__file__
    from sklearn.datasets import make_blobs
    from ntnumba import NTClustering
    X, _ = make_blobs(200, n_features=8, centers=3, random_state=0)
    t, c = time.perf_counter(), time.process_time()
    NTClustering(3, random_state=0).fit(X)
    out["seconds"] = time.process_time() - c
    out["wall"] = time.perf_counter() - t
except Exception as exc:
    out["error"] = traceback.format_exception_only(type(exc), exc)[-1].strip()
print(json.dumps(out))
"""


def _git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def _extract(rev, dest):
    """The ``ntnumba`` package of commit ``rev`` below ``dest``; returns (commit, None) or
    (None, why not)."""
    res = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if res.returncode != 0:
        return None, f"{rev} names no commit here (first commit, or a shallow clone?)"
    commit = res.stdout.strip()
    res = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, "ntnumba"],
                         capture_output=True)
    if res.returncode != 0:
        return None, f"{commit[:10]} has no ntnumba package"
    with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):   # Python >= 3.12, and security releases before
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover
            tar.extractall(dest)
    return commit, None


class Side:
    """One code base: its tree (imported through ``PYTHONPATH``), the numba cache of its
    runtime worker (``cache``; None: the environment's, as for the working tree), its figures
    and the first error of each benchmark."""

    def __init__(self, label, tree, work, cache):
        self.label, self.tree, self.work, self.cache = label, Path(tree), Path(work), cache
        self.times = {name: [] for name, _ in BENCHMARKS}
        self.errors = {}
        self.wall = []   # the first call's time on the clock
        self.worker = None

    def env(self, cache):
        env = dict(os.environ, PYTHONPATH=str(self.tree))
        env.pop("NUMBA_DISABLE_JIT", None)
        if cache is not None:
            env["NUMBA_CACHE_DIR"] = str(cache)
        return env

    def _script(self, name, code):
        path = self.work / name
        path.write_text(textwrap.dedent(code))
        return path

    def _imported(self, where):
        """None when ntnumba came from this tree, else what went wrong."""
        if where is None:
            return "import ntnumba failed"
        if self.tree.resolve() not in Path(where).resolve().parents:
            return f"imported ntnumba from {where}, not from {self.tree}"
        return None

    # the runtime worker ---------------------------------------------------------------------
    def start(self):
        self.stderr = open(self.work / "worker.err", "w")
        self.worker = subprocess.Popen(
            [sys.executable, str(self._script("worker.py", _WORKER))], cwd=self.work,
            env=self.env(self.cache), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True, bufsize=1)
        self.lines = queue.Queue()   # the worker's answers; "" once it has exited

        def read(stdout, lines):
            for line in stdout:
                lines.put(line)
            lines.put("")
        threading.Thread(target=read, args=(self.worker.stdout, self.lines), daemon=True).start()
        first = self._answer(TIMEOUT)
        why = first.get("error") or self._imported(first.get("file"))
        if why:
            self.stop()
            for name in ("iteration", "default fit"):
                self.errors.setdefault(name, why)

    def _answer(self, timeout):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return {"error": f"no answer within {timeout} s"}
        if not line:
            self.stderr.flush()
            tail = (self.work / "worker.err").read_text().strip().splitlines()
            return {"error": f"the worker exited: {tail[-1] if tail else '(no message)'}"}
        return json.loads(line)

    def ask(self, name, setup=False):
        """Run the benchmark ``name`` in the worker and record its figure (``setup``: set it
        up, untimed)."""
        if self.worker is None or name in self.errors:
            return
        self.worker.stdin.write(f"{'setup ' if setup else ''}{name}\n")
        self.worker.stdin.flush()
        out = self._answer(TIMEOUT)
        if "error" in out:
            self.errors.setdefault(name, out["error"])
        elif not setup:
            self.times[name].append(out["seconds"])

    def stop(self):
        if self.worker is not None:
            try:
                self.worker.stdin.close()
                self.worker.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):  # pragma: no cover
                self.worker.kill()
                self.worker.wait()
            self.stderr.close()
            self.worker = None

    # the first-call interpreter ---------------------------------------------------------------
    def first_call(self):
        if "first call" in self.errors:
            return
        with tempfile.TemporaryDirectory(dir=self.work) as empty:
            try:
                res = subprocess.run([sys.executable, str(self._script("first.py", _FIRST_CALL))],
                                     cwd=self.work, env=self.env(empty), capture_output=True,
                                     text=True, timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.errors["first call"] = f"no result within {TIMEOUT} s"
                return
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
        if res.returncode != 0 or not lines:
            tail = (res.stderr.strip().splitlines() or ["(no message)"])[-1]
            self.errors["first call"] = f"exit {res.returncode}: {tail}"
            return
        out = json.loads(lines[-1])
        why = out.get("error") or self._imported(out["file"])
        if why:
            self.errors["first call"] = why
        else:
            self.times["first call"].append(out["seconds"])
            self.wall.append(out["wall"])

    def median(self, name):
        return statistics.median(self.times[name]) if self.times[name] else None


def measure(base, head, repeat, names, stream):
    """The two sides take turns (base first in even repeats, head first in odd ones); in each
    turn a fresh worker interpreter gives one figure of each runtime benchmark (after its
    untimed set-up), and a fresh interpreter with an empty numba cache the first call."""
    def say(msg):
        print(msg, file=stream, flush=True)
    runtime = [n for n, _ in BENCHMARKS if n in names and n != "first call"]
    for r in range(repeat):
        for side in ((base, head) if r % 2 == 0 else (head, base)):
            todo = [n for n in runtime if n not in side.errors]
            if todo:
                say(f"repeat {r + 1}/{repeat}: {side.label}: {', '.join(todo)}")
                side.start()
                try:
                    for name in todo:
                        side.ask(name, setup=True)
                        side.ask(name)
                finally:
                    side.stop()
        if "first call" in names:
            for side in ((base, head) if r % 2 == 0 else (head, base)):
                if "first call" not in side.errors:
                    say(f"repeat {r + 1}/{repeat}: {side.label}: first call")
                    side.first_call()


def table(base, head, names, factor):
    """(rows of text, the benchmarks that failed)."""
    width = max(len(f"{n}: {w}") for n, w in BENCHMARKS)
    rows = [f"{'benchmark':<{width}} {'base':>8} {'head':>8} {'head/base':>10}  verdict"]
    failed = []
    for name, what in BENCHMARKS:
        if name not in names:
            continue
        label = f"{name}: {what}"
        b, h = base.median(name), head.median(name)
        for side in (base, head):   # one line of the table: the error's first 100 characters
            if name in side.errors and len(side.errors[name]) > 100:
                side.errors[name] = side.errors[name][:97] + "..."
        if name in head.errors or h is None:
            verdict = f"FAILED: the head cannot run it ({head.errors.get(name, 'no result')})"
            failed.append(name)
            rows.append(f"{label:<{width}} {'-':>8} {'-':>8} {'-':>10}  {verdict}")
            continue
        if name in base.errors or b is None:
            verdict = f"skipped: the base cannot run it ({base.errors.get(name, 'no result')})"
            rows.append(f"{label:<{width}} {'-':>8} {h:8.3f} {'-':>10}  {verdict}")
            continue
        ratio = h / b
        verdict = "ok" if ratio <= factor else f"SLOWER than {factor:g}x"
        if ratio > factor:
            failed.append(name)
        rows.append(f"{label:<{width}} {b:8.3f} {h:8.3f} {ratio:10.2f}  {verdict}")
    return rows, failed


def build_parser():
    ap = argparse.ArgumentParser(prog="python -m benchmarks.regression", description=(
        "Time key benchmarks of this tree and of an earlier commit in one run, interleaved, "
        "and fail on a slowdown beyond --factor."))
    ap.add_argument("--base", default="HEAD~1", help="the commit to compare with (HEAD~1)")
    ap.add_argument("--head", default=None,
                    help="a commit to measure instead of the working tree")
    ap.add_argument("--repeat", type=int, default=3,
                    help="figures per side and benchmark; the medians are compared (3)")
    ap.add_argument("--factor", type=float, default=1.5,
                    help="fail when head > factor x base (1.5)")
    ap.add_argument("--only", action="append", choices=[n for n, _ in BENCHMARKS],
                    help="run only this benchmark (repeatable)")
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    return ap


def main(argv=None, stream=None):
    args = build_parser().parse_args(argv)
    stream = sys.stdout if stream is None else stream
    if args.repeat < 1 or args.factor <= 1.0:
        print("python -m benchmarks.regression: error: --repeat >= 1 and --factor > 1 "
              "are needed", file=sys.stderr)
        return 2
    names = args.only or [n for n, _ in BENCHMARKS]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    with tempfile.TemporaryDirectory(prefix="ntnumba-regression-") as work:
        work = Path(work)
        (work / "base").mkdir()
        (work / "head").mkdir()
        base_commit, why = _extract(args.base, work / "base" / "tree")
        if args.head is None:
            head_tree, head_name = ROOT, "working tree"
        else:
            head_commit, head_why = _extract(args.head, work / "head" / "tree")
            if head_commit is None:
                print(f"python -m benchmarks.regression: error: --head: {head_why}",
                      file=sys.stderr)
                return 2
            head_tree, head_name = work / "head" / "tree", head_commit[:10]
        head = Side("head", head_tree, work / "head",
                    None if args.head is None else work / "head" / "numba-cache")
        if base_commit is None:
            print(f"regression check: base {args.base}: {why}; every benchmark skipped",
                  file=stream)
            return 0
        base = Side("base", work / "base" / "tree", work / "base", work / "base" / "numba-cache")
        print(f"regression check: base {args.base} ({base_commit[:10]}) against head "
              f"({head_name}), {args.repeat} figures per side, factor {args.factor:g}, "
              f"load average {load}", file=stream, flush=True)
        measure(base, head, args.repeat, names, stream)
    rows, failed = table(base, head, names, args.factor)
    print("\n".join(rows), file=stream)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "base": base_commit, "head": head_name, "factor": args.factor, "load": load,
            "base_times": base.times, "head_times": head.times,
            "first_call_wall": {"base": base.wall, "head": head.wall},
            "base_errors": base.errors, "head_errors": head.errors}, indent=1))
    if failed:
        print(f"regression check failed: {', '.join(failed)}", file=stream)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

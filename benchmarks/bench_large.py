"""Large-data benchmark: the default fit beside scikit-learn's KMeans, MiniBatchKMeans and
SpectralClustering on the same data, in one run.

Run ``python -m benchmarks.bench_large`` (``--help`` for sizes and data sets). Every method runs in
its own fresh Python process on the same data (a temporary ``.npy`` file): wall time of the fit,
processor time of the fit (user + system, all threads; less sensitive than the wall time to
other jobs on the machine), peak resident memory of the fit above the process's memory just
before it (data loaded, libraries imported, the default fit's kernels compiled by a warm-up fit
on a few rows; Linux ``VmHWM`` reset through ``/proc/self/clear_refs``), and quality against
the generating labels (ARI, NMI). The table ends with the ratios of the default fit to each
peer. With ``--repeat R`` every method is fitted ``R`` times (fresh processes, the methods
interleaved so that a change of the machine's load hits all of them), and the table and the
ratios give the medians. The first-call compilation time of the default fit's kernels (a fresh
process, first fit minus second fit on the same small data) is reported with ``--compile``.

Data (structured, synthetic or augmented real; all generated here, nothing is downloaded):

* ``blobs``: ``C`` isotropic Gaussian blobs (``sklearn.datasets.make_blobs``, ``cluster_std=2``).
* ``subspaces``: a union of ``C`` random 5-dimensional linear subspaces, unit-norm
  coefficients, plus 5% isotropic noise (the model of subspace clustering).
* ``coil``: the packaged COIL-20 demo (32x32) augmented: each sample a random training image
  shifted by up to one pixel and with 5% noise, ``n`` rows (``ntnumba.datasets.load_demo``).
* ``coil20``, ``orl``, ``yaleb``: the paper's data sets at the paper's sizes
  (``benchmarks.common.load``; ``n``, ``d`` and ``--clusters`` do not apply), for the ratio of
  the default fit's time to SpectralClustering's at those sizes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from .common import load, positive_int

_CHILD = r"""
import json, resource, sys, time
import numpy as np
X = np.load({path!r}, mmap_mode=None)
{setup}

def status(key):
    with open("/proc/self/status") as f:
        return int(next(l for l in f if l.startswith(key + ":")).split()[1])

try:  # reset the peak resident set (VmHWM) after the imports and the warm-up fit
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status("VmRSS")
except OSError:  # no reset: the peak of the whole process
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

c = cpu()
t = time.perf_counter()
labels = est.fit(X).labels_
t = time.perf_counter() - t
c = cpu() - c
try:
    peak = status("VmHWM")
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
np.save({out!r}, np.asarray(labels))
print(json.dumps({{"time": t, "cpu": c, "peak_kb": peak, "base_kb": base}}))
"""

_METHODS = {
    "ntnumba": ("from ntnumba import NTClustering\n"
                "est = NTClustering({C}, random_state=0, verbose={verbose})\n"
                "NTClustering({C}, random_state=0).fit(X[:max(4 * {C}, 60)])  # compile"),
    # the default fit on the rows in another order (labels put back in the original order)
    "ntnumba-shuffled": ("from ntnumba import NTClustering\n"
                         "perm = np.random.default_rng(1).permutation(X.shape[0])\n"
                         "class _Shuffled:\n"
                         "    def fit(self, X):\n"
                         "        m = NTClustering({C}, random_state=0).fit(X[perm])\n"
                         "        m.labels_ = m.labels_[np.argsort(perm)]\n"
                         "        return m\n"
                         "est = _Shuffled()\n"
                         "NTClustering({C}, random_state=0).fit(X[:max(4 * {C}, 60)])"),
    "KMeans": "from sklearn.cluster import KMeans\nest = KMeans({C}, random_state=0)",
    "MiniBatchKMeans": ("from sklearn.cluster import MiniBatchKMeans\n"
                        "est = MiniBatchKMeans({C}, random_state=0)"),
    "SpectralClustering": ("from sklearn.cluster import SpectralClustering\n"
                           "est = SpectralClustering({C}, affinity='nearest_neighbors', "
                           "n_neighbors=10, assign_labels='cluster_qr', random_state=0)"),
}

_COMPILE = r"""
import time
t0 = time.perf_counter()
import numpy as np
from ntnumba import NTClustering
from sklearn.datasets import make_blobs
X, _ = make_blobs(300, n_features=20, centers=3, random_state=0)
t1 = time.perf_counter()
NTClustering(3, random_state=0).fit(X)
t2 = time.perf_counter()
NTClustering(3, random_state=0).fit(X)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


#: the paper's data sets (at the paper's sizes)
PAPER = ("coil20", "orl", "yaleb")


def make_data(kind, n, d, C, seed=0):
    """``(X, y)``: ``n`` rows of the data set ``kind`` (module docs) in ``d`` dimensions."""
    rng = np.random.default_rng(seed)
    if kind == "blobs":
        from sklearn.datasets import make_blobs
        X, y = make_blobs(n, n_features=d, centers=C, cluster_std=2.0, random_state=seed)
        return X.astype(np.float64), y
    if kind == "subspaces":
        y = rng.integers(0, C, n)
        bases = np.linalg.qr(rng.standard_normal((C, d, 5)))[0]      # C x d x 5
        coef = rng.standard_normal((n, 5))
        coef /= np.linalg.norm(coef, axis=1, keepdims=True)
        X = np.einsum("ndk,nk->nd", bases[y], coef)
        X += 0.05 / np.sqrt(d) * rng.standard_normal((n, d))
        return X, y
    if kind == "coil":
        from ntnumba.datasets import load_demo
        X0, y0 = load_demo()
        imgs = X0.reshape(-1, 32, 32)
        pick = rng.integers(0, X0.shape[0], n)
        X = np.empty((n, 1024))
        for s in range(0, n, 4096):
            p = pick[s:s + 4096]
            dx, dy = rng.integers(-1, 2, (2, p.size))
            block = np.stack([np.roll(np.roll(imgs[i], a, 0), b, 1)
                              for i, a, b in zip(p, dx, dy)]).reshape(p.size, -1)
            X[s:s + p.size] = block + 0.05 * X0.std() * rng.standard_normal(block.shape)
        return X, y0[pick]
    if kind in PAPER:
        return load(kind)
    raise ValueError(f"kind: expected 'blobs', 'subspaces', 'coil' or one of {PAPER}, "
                     f"got {kind!r}")


def run_method(name, path, C, verbose=0, timeout=3600):
    """Fit ``name`` in a fresh process on the data at ``path``: its result dict and labels."""
    out = path + f".{name}.labels.npy"
    code = _CHILD.format(path=path, out=out,
                         setup=_METHODS[name].format(C=C, verbose=int(verbose)))
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}, None
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:200]}, None
    if verbose:
        sys.stderr.write(proc.stderr)
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return res, np.load(out)


def compile_time():
    """(import, first fit, second fit) seconds of the default fit in a fresh process with an
    empty numba cache directory (``NUMBA_CACHE_DIR``: everything compiles)."""
    with tempfile.TemporaryDirectory(prefix="ntnumba-numba-cache-") as d:
        proc = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True,
                              check=True, env={**os.environ, "NUMBA_CACHE_DIR": d})
    return tuple(float(v) for v in proc.stdout.split())


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_large", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="blobs,subspaces,coil",
                    help="comma-separated data sets: blobs, subspaces, coil, coil20, orl, "
                         "yaleb")
    ap.add_argument("--n", default="10000", help="comma-separated row counts")
    ap.add_argument("--d", type=int, default=100, help="dimension of blobs and subspaces")
    ap.add_argument("--clusters", type=int, default=10)
    ap.add_argument("--methods", default="ntnumba,KMeans,MiniBatchKMeans,SpectralClustering")
    ap.add_argument("--spectral-max", type=int, default=50000,
                    help="skip SpectralClustering above this many rows")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per fit")
    ap.add_argument("--repeat", type=positive_int, default=1,
                    help="fits per method, each in a fresh process, the methods interleaved; "
                         "the table and the ratios report the medians")
    ap.add_argument("--compile", action="store_true", help="also the first-call compile time")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--verbose", type=int, default=0, help="the default fit's progress")
    args = ap.parse_args(argv)
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    print(f"load average at start: {os.getloadavg()}", flush=True)
    results = []
    methods = args.methods.split(",")
    unknown = [m for m in methods if m not in _METHODS]
    if unknown:
        ap.error(f"--methods: unknown {', '.join(unknown)}; choose from {', '.join(_METHODS)}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.data.split(","):
            sizes = [0] if kind in PAPER else [int(float(v)) for v in args.n.split(",")]
            for n in sizes:
                X, y = make_data(kind, n, args.d, args.clusters)
                n = X.shape[0]
                C = int(np.unique(y).size) if kind in PAPER else args.clusters
                path = os.path.join(tmp, f"{kind}_{n}.npy")
                np.save(path, X)
                mb = X.nbytes / 2 ** 20
                row = {"data": kind, "n": n, "d": X.shape[1], "data_MB": mb, "fits": {}}
                runs = {name: [] for name in methods}
                for rep in range(args.repeat):  # the methods interleaved, one round per repeat
                    for name in methods:
                        if name == "SpectralClustering" and n > args.spectral_max:
                            runs[name] = [{"error": f"skipped (n > {args.spectral_max})"}]
                            continue
                        res, labels = run_method(name, path, C, args.verbose, args.timeout)
                        if labels is not None:
                            res["ARI"] = float(adjusted_rand_score(y, labels))
                            res["NMI"] = float(normalized_mutual_info_score(y, labels))
                            res["peak_MB"] = (res["peak_kb"] - res["base_kb"]) / 1024
                        runs[name].append(res)
                        if args.repeat > 1:
                            _print_fit(row, name, res, f"run {rep + 1}")
                        if (labels is not None and rep == 0
                                and name in ("ntnumba", "ntnumba-shuffled")):
                            row.setdefault("_labels", {})[name] = labels
                for name in methods:
                    res = row["fits"][name] = median_fit(runs[name])
                    _print_fit(row, name, res,
                               f"median of {len(runs[name])}" if args.repeat > 1 else "")
                lab = row.pop("_labels", {})
                if len(lab) == 2:  # row-order independence
                    row["order_ARI"] = float(adjusted_rand_score(*lab.values()))
                    print(f"{'':>9} ARI between the default fit on the rows as given and "
                          f"shuffled: {row['order_ARI']:.4f}", flush=True)
                _print_ratios(row)
                results.append(row)
    out = {"load_end": os.getloadavg(), "results": results}
    if args.compile:
        imp, first, second = compile_time()
        out["compile"] = {"import": imp, "first_fit": first, "second_fit": second,
                          "compile": first - second}
        print(f"compile: import {imp:.1f} s, first fit {first:.1f} s, second {second:.1f} s: "
              f"compilation ~{first - second:.1f} s", flush=True)
    print(f"load average at end: {out['load_end']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


def median_fit(runs):
    """One method's result from its repeated fits: the medians of ``time``, ``cpu`` and
    ``peak_MB``, the quality of the first fit, and every fit's time and processor time under
    ``times`` and ``cpus``; the first error if any fit failed.

    Examples
    --------
    >>> from benchmarks.bench_large import median_fit
    >>> r = median_fit([{"time": 3.0, "cpu": 2.0, "peak_MB": 9.0, "ARI": 1.0},
    ...                 {"time": 1.0, "cpu": 1.0, "peak_MB": 8.0, "ARI": 1.0},
    ...                 {"time": 2.0, "cpu": 5.0, "peak_MB": 7.0, "ARI": 1.0}])
    >>> r["time"], r["cpu"], r["peak_MB"], r["times"]
    (2.0, 2.0, 8.0, [3.0, 1.0, 2.0])
    """
    for res in runs:
        if "error" in res:
            return dict(res)
    out = dict(runs[0])
    for key in ("time", "cpu", "peak_MB"):
        vals = [res[key] for res in runs if key in res]
        if vals:
            out[key] = float(np.median(vals))
    out["times"] = [res["time"] for res in runs]
    out["cpus"] = [res.get("cpu", float("nan")) for res in runs]
    out["repeat"] = len(runs)
    return out


def _print_fit(row, name, res, note=""):
    head = f"{row['data']:>9} n={row['n']:>8} d={row['d']:>5} {name:>18}"
    if "error" in res:
        print(f"{head}  {res['error']}", flush=True)
        return
    print(f"{head}  time {res['time']:8.2f} s  cpu {res.get('cpu', float('nan')):7.2f} s  "
          f"peak {res['peak_MB']:8.0f} MB "
          f"({res['peak_MB'] / row['data_MB']:5.1f} x data)  ARI {res['ARI']:.3f}  "
          f"NMI {res['NMI']:.3f}" + (f"  ({note})" if note else ""), flush=True)


def _print_ratios(row):
    nt = row["fits"].get("ntnumba", {})
    if "time" not in nt:
        return
    for name, res in row["fits"].items():
        if name.startswith("ntnumba") or "time" not in res:
            continue
        mem = (f"{nt['peak_MB'] / res['peak_MB']:.2f}x" if res["peak_MB"] >= 1.0
               else "n/a (peer below 1 MB above the loaded data)")
        cpu = (f"cpu {nt['cpu'] / res['cpu']:.2f}x, " if res.get("cpu", 0) > 0 and "cpu" in nt
               else "")
        print(f"{'':>9} ntnumba / {name}: time {nt['time'] / res['time']:.2f}x, {cpu}"
              f"peak memory {mem}, ARI {nt['ARI'] - res['ARI']:+.3f}", flush=True)


if __name__ == "__main__":  # pragma: no cover
    main()

"""Peak memory of ``predict`` (and ``transform``/``score``/``predict_proba``) on many rows.

``python -m benchmarks.predict_memory [--rows 100000] [--features 50] [--fit-rows 2000]
[--method predict]``: fits the default ``NTClustering(8, random_state=0)`` on ``--fit-rows``
rows of 8 Gaussian blobs, saves it, then in a fresh process loads it, calls ``--method`` once
on 10 rows (compilation) and once on ``--rows`` new rows of the same blobs. Prints one JSON
line: the fresh process's peak resident set (``ru_maxrss``: imports, model and data
included), the peak of the numpy allocations during the call (``tracemalloc``), its wall time,
the load average, and a hash of the output (to compare two commits).
"""
import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc

import numpy as np


def blobs(n, N, seed):
    rng = np.random.default_rng(0)
    centers = 4.0 * rng.standard_normal((8, N))
    rng = np.random.default_rng(seed)
    return centers[rng.integers(0, 8, n)] + rng.standard_normal((n, N))


def child(a):
    import ntnumba
    model = ntnumba.load(a.model)
    X = blobs(a.rows, a.features, 1)
    call = getattr(model, a.method)
    call(X[:10])
    tracemalloc.start()
    t = time.perf_counter()
    out = np.asarray(call(X))
    seconds = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({
        "method": a.method, "shape": [a.rows, a.features], "fit_rows": a.fit_rows,
        "seconds": round(seconds, 2), "tracemalloc_peak_MB": round(peak / 2 ** 20),
        "peak_rss_MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "output_sha256": hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()[:16],
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.predict_memory",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--fit-rows", type=int, default=2000)
    ap.add_argument("--method", default="predict",
                    choices=("predict", "transform", "score", "predict_proba"))
    ap.add_argument("--model", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.model:
        return child(a)
    from ntnumba import NTClustering
    with tempfile.TemporaryDirectory() as d:
        path = NTClustering(8, random_state=0).fit(
            blobs(a.fit_rows, a.features, 0)).save(os.path.join(d, "model.npz"))
        args = [sys.executable, "-m", "benchmarks.predict_memory", "--model", path,
                "--rows", str(a.rows), "--features", str(a.features), "--fit-rows",
                str(a.fit_rows), "--method", a.method]
        subprocess.run(args, check=True, cwd=os.path.dirname(os.path.dirname(__file__)))


if __name__ == "__main__":
    main()

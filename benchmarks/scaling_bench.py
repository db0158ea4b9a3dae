"""Measurements of docs/scaling.md: bounded memory of the chunked fit from a memmap, and the
Dask backend on local workers against one process.

Commands (each measurement runs in a fresh process; peak RSS is the process's high-water mark,
``ru_maxrss``; the numba kernels are compiled by a small warm-up fit before the clock starts)::

    python benchmarks/scaling_bench.py make   --n 1000000 --dim 1024 --path /tmp/ntnumba_scaling.f32
    python benchmarks/scaling_bench.py stream --n 100000 --path /tmp/ntnumba_scaling.f32
    python benchmarks/scaling_bench.py dask   --n 100000 --workers 2 --path /tmp/ntnumba_scaling.f32
    python benchmarks/scaling_bench.py all    --sizes 100000 300000 1000000 --dask-n 100000

Each prints one JSON line. The model: ``n_components=1024`` (= dim, the smallest learned map),
``n_clusters=4``, ``n_similarity=1``, ``assign="objective"``, ``init="k-means++"``,
``max_iter=1``, blocks of ``--chunk`` rows (default 10000).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

MODEL = dict(n_clusters=4, n_components=1024, n_similarity=1, assign="objective",
             init="k-means++", max_iter=1, random_state=0)


def make(path, n, dim, seed=0):
    """n x dim float32 memmap: 4 clusters (unit-variance noise around random centres)."""
    rng = np.random.default_rng(seed)
    centres = 0.5 * rng.standard_normal((4, dim)).astype(np.float32)
    X = np.memmap(path, dtype=np.float32, mode="w+", shape=(n, dim))
    step = 50_000
    for s in range(0, n, step):
        e = min(n, s + step)
        lab = rng.integers(0, 4, e - s)
        X[s:e] = centres[lab] + rng.standard_normal((e - s, dim), dtype=np.float32)
    X.flush()
    return {"made": path, "n": n, "dim": dim, "bytes": os.path.getsize(path)}


def _open(path, n, dim):
    full = os.path.getsize(path) // (4 * dim)
    if n > full:
        raise SystemExit(f"--n {n}: {path} has only {full} rows; run 'make' with a larger --n")
    return np.memmap(path, dtype=np.float32, mode="r", shape=(n, dim))


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _warm_up(dim):
    from ntnumba import NTClustering
    X = np.random.default_rng(1).standard_normal((300, dim)).astype(np.float32)
    NTClustering(**dict(MODEL, n_components=dim)).fit(X, chunk_size=100)


def stream(path, n, dim, chunk, n_jobs):
    from ntnumba import NTClustering
    _warm_up(dim)
    rss0 = _rss_mb()
    X = _open(path, n, dim)
    t = time.perf_counter()
    m = NTClustering(**MODEL, n_jobs=n_jobs).fit(X, chunk_size=chunk)
    dt = time.perf_counter() - t
    return {"mode": "stream", "n": n, "dim": dim, "chunk": chunk, "n_jobs": n_jobs,
            "seconds": round(dt, 2), "us_per_sample": round(1e6 * dt / n, 1),
            "peak_rss_mb": round(_rss_mb(), 1), "rss_after_warm_up_mb": round(rss0, 1),
            "n_x_M_float32_mb": round(n * 1024 * 4 / 2 ** 20, 1),
            "objective": float(m.objective_history_[-1]),
            "cluster_sizes": np.bincount(m.labels_, minlength=4).tolist()}


def _read_rows(path, start, stop, dim):
    with open(path, "rb") as f:
        f.seek(start * dim * 4)
        return np.fromfile(f, dtype=np.float32, count=(stop - start) * dim).reshape(-1, dim)


def _worker_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def dask_run(path, n, dim, chunk, workers):
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    from ntnumba.dask import NTClustering
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address=None, memory_limit=0)
    client = Client(cluster)
    try:
        Xw = np.random.default_rng(1).standard_normal((300, dim)).astype(np.float32)
        NTClustering(**dict(MODEL, n_components=dim)).fit(da.from_array(Xw, chunks=(100, dim)))
        blocks = [da.from_delayed(dask.delayed(_read_rows)(path, s, min(n, s + chunk), dim),
                                  shape=(min(n, s + chunk) - s, dim), dtype=np.float32)
                  for s in range(0, n, chunk)]
        X = da.concatenate(blocks, axis=0)
        t = time.perf_counter()
        m = NTClustering(**MODEL).fit(X)
        dt = time.perf_counter() - t
        wrss = client.run(_worker_rss)
        return {"mode": "dask", "n": n, "dim": dim, "chunk": chunk, "workers": workers,
                "threads_per_worker": 1, "seconds": round(dt, 2),
                "us_per_sample": round(1e6 * dt / n, 1),
                "client_peak_rss_mb": round(_rss_mb(), 1),
                "worker_peak_rss_mb": sorted(round(v, 1) for v in wrss.values()),
                "objective": float(m.objective_history_[-1]),
                "cluster_sizes": np.bincount(m.labels_.compute(), minlength=4).tolist()}
    finally:
        client.close()
        cluster.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["make", "stream", "dask", "all"])
    ap.add_argument("--path", default="/tmp/ntnumba_scaling.f32")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--chunk", type=int, default=10_000)
    ap.add_argument("--n-jobs", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--dask-n", type=int, default=100_000)
    a = ap.parse_args(argv)
    if a.what == "make":
        print(json.dumps(make(a.path, a.n, a.dim)), flush=True)
    elif a.what == "stream":
        print(json.dumps(stream(a.path, a.n, a.dim, a.chunk, a.n_jobs)), flush=True)
    elif a.what == "dask":
        print(json.dumps(dask_run(a.path, a.n, a.dim, a.chunk, a.workers)), flush=True)
    else:
        me = [sys.executable, os.path.abspath(__file__)]
        common = ["--path", a.path, "--dim", str(a.dim), "--chunk", str(a.chunk)]
        for n in a.sizes:
            subprocess.run(me + ["stream", "--n", str(n)] + common, check=True)
        subprocess.run(me + ["stream", "--n", str(a.dask_n)] + common, check=True)
        subprocess.run(me + ["dask", "--n", str(a.dask_n), "--workers", str(a.workers)]
                       + common, check=True)


if __name__ == "__main__":
    main()

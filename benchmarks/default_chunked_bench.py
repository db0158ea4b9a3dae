"""The default fit through ``chunk_size`` from a memmap: time, peak memory of the fit, ARI.

Usage: ``python benchmarks/default_chunked_bench.py N CHUNK [PATH]``: ``N`` rows of 10 blobs in 100
dimensions (``sklearn.datasets.make_blobs``, written once to ``PATH``, default
``/tmp/ntnumba_blobs_N.npy``, and its labels beside it), then
``NTClustering(10, random_state=0, verbose=1).fit(memmap, chunk_size=CHUNK)`` after a warm-up
fit. Peak memory: Linux ``VmHWM`` reset through ``/proc/self/clear_refs`` just before the fit.
Needs ``N * 2100 * 8`` bytes of temporary disk (the representations between passes).
"""
import os
import sys
import time

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score


def _status(key):
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(key + ":")).split()[1]) // 1024


def main(n, chunk, path=None):
    path = path or f"/tmp/ntnumba_blobs_{n}.npy"
    ypath = path + ".y.npy"
    if not os.path.exists(ypath):
        centers = np.random.default_rng(0).uniform(-10, 10, (10, 100))
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, 100))
        ys = np.empty(n, dtype=np.int64)
        for s in range(0, n, 100000):
            e = min(n, s + 100000)
            mm[s:e], ys[s:e] = make_blobs(e - s, centers=centers, cluster_std=2.0,
                                          random_state=s)
        mm.flush()
        del mm
        np.save(ypath, ys)
    y = np.load(ypath)
    X = np.load(path, mmap_mode="r")
    from ntnumba import NTClustering
    NTClustering(10, random_state=0).fit(np.asarray(X[:60]))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status("VmRSS")
    print("load", os.getloadavg(), "rss before fit", base, "MB", flush=True)
    t = time.perf_counter()
    m = NTClustering(10, random_state=0, verbose=1).fit(X, chunk_size=chunk)
    t = time.perf_counter() - t
    print(f"n={n} chunk={chunk} time {t:.1f} s peak {_status('VmHWM')} MB (before fit {base} "
          f"MB; data {X.nbytes / 2**20:.0f} MB on disk) ARI "
          f"{adjusted_rand_score(y, m.labels_):.4f} load {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main(int(float(sys.argv[1])), int(sys.argv[2]), *sys.argv[3:4])

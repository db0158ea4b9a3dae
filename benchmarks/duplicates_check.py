"""Duplicated and near-duplicated samples: the default fit in memory, chunked and with Dask.

COIL-20 demo (1440 images, 32x32, shipped with the package) as given, every image repeated 2, 4
and 8 times, and tiled 5 times plus Gaussian noise of 0.05 times the data's standard deviation;
ARI of ``NTClustering(20, random_state=0)`` against the object labels. Run:

    python benchmarks/duplicates_check.py memory,chunked,dask

(the Dask path starts a two-worker ``LocalCluster``). Numbers: docs/reliability.md.
"""
import sys
import time
import warnings

import numpy as np
from sklearn.metrics import adjusted_rand_score

from ntnumba import NTClustering
from ntnumba.datasets import load_demo


def cases():
    X, y = load_demo()
    out = {"unique": (X, y)}
    for r in (2, 4, 8):
        out[f"repeated x{r}"] = (np.repeat(X, r, axis=0), np.repeat(y, r))
    T = np.repeat(X, 5, axis=0)
    noise = 0.05 * X.std() * np.random.default_rng(0).standard_normal(T.shape)
    out["tiled x5 + noise"] = (T + noise, np.repeat(y, 5))
    return out


def fit(X, path):
    if path == "memory":
        return NTClustering(20, random_state=0).fit(X)
    if path == "chunked":
        return NTClustering(20, random_state=0).fit(X, chunk_size=len(X) // 4)
    import dask.array as da
    from ntnumba.dask import NTClustering as DaskNTClustering
    return DaskNTClustering(20, random_state=0).fit(
        da.from_array(X, chunks=(len(X) // 4, X.shape[1])))


def main(paths):
    warnings.simplefilter("ignore")
    client = None
    if "dask" in paths:
        from distributed import Client, LocalCluster
        client = Client(LocalCluster(n_workers=2, threads_per_worker=1,
                                     dashboard_address=None))
    try:
        for name, (X, y) in cases().items():
            for path in paths:
                t = time.perf_counter()
                model = fit(X, path)
                print(f"{name:18s} {path:8s} n = {len(X):6d}  ARI "
                      f"{adjusted_rand_score(y, model.labels_):.3f}  "
                      f"{time.perf_counter() - t:.1f} s", flush=True)
    finally:
        if client is not None:
            client.close()
            client.cluster.close()


if __name__ == "__main__":
    main(sys.argv[1].split(",") if len(sys.argv) > 1 else ["memory", "chunked", "dask"])

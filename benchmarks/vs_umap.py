"""Processor time of the default fit against UMAP -> KMeans, side by side in one run.

Issue 25's time target: the default fit no slower than UMAP -> KMeans on the same data. For
every data set of the development suite (``benchmarks.devsuite``, loaded as it loads them)
and seed, in one process, alternating which runs first: ``NTClustering(C, random_state=seed)
.fit(X)`` (the whole default, on wide data too: its model is bounded by ``n_components``) and
umap-learn's ``UMAP(metric="cosine", n_neighbors=15, min_dist=0, n_components=10,
random_state=seed)`` then ``KMeans(n_init=10)`` (on the sparse rows for a sparse set, as the
suite runs it). Both are warmed up first (numba's
compilation is not counted). The time is the process's processor time (every thread), which
other jobs on the machine change less than time on the clock; the ratio is default / peer.

Run from the repository root (``NTNUMBA_DATA`` the data folder)::

    python -m benchmarks.vs_umap                         # every set, seed 0
    python -m benchmarks.vs_umap --datasets coil20,relathe --seeds 2
"""
import argparse
import statistics
import time
import warnings

import numpy as np


def _time(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t


def default_fit(X, C, seed):
    from ntnumba import NTClustering
    return lambda: NTClustering(C, random_state=seed).fit(X)


def umap_kmeans(X, C, seed):
    def run():
        import umap
        from sklearn.cluster import KMeans

        from .devsuite import UMAP_ARGS
        args = dict(UMAP_ARGS, n_neighbors=min(UMAP_ARGS["n_neighbors"], X.shape[0] - 1))
        Z = umap.UMAP(random_state=seed, **args).fit_transform(X)
        KMeans(C, n_init=10, random_state=seed).fit_predict(Z)
    return run


def main(argv=None):
    from .devsuite import SUITE, load_inputs

    ap = argparse.ArgumentParser(prog="python -m benchmarks.vs_umap", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=None, help="comma-separated (default: every set)")
    ap.add_argument("--seeds", type=int, default=1)
    args = ap.parse_args(argv)
    names = args.datasets.split(",") if args.datasets else list(SUITE)
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    Xw = rng.standard_normal((200, 20))
    default_fit(Xw, 3, 0)()
    umap_kmeans(Xw, 3, 0)()
    ratios = []
    print(f"{'data':<16} {'n x N':>12} {'default s':>10} {'UMAP->KMeans s':>15} {'ratio':>6}")
    for name in names:
        X, X_sparse, y = load_inputs(name)
        C = int(y.max()) + 1
        for seed in range(args.seeds):
            Xu = X if X_sparse is None else X_sparse
            runs = [("d", default_fit(X, C, seed)), ("u", umap_kmeans(Xu, C, seed))]
            if seed % 2:
                runs.reverse()
            t = {k: _time(fn) for k, fn in runs}
            ratios.append(t["d"] / t["u"])
            print(f"{name:<16} {X.shape[0]:>5} x {X.shape[1]:<5} {t['d']:>10.2f} "
                  f"{t['u']:>15.2f} {ratios[-1]:>6.2f}", flush=True)
    print(f"median ratio {statistics.median(ratios):.2f}, max {max(ratios):.2f}, "
          f"{sum(r <= 1.0 for r in ratios)} of {len(ratios)} at most 1")


if __name__ == "__main__":
    main()

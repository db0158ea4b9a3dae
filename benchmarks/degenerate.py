"""Stress cases for degenerate partitions: well separated clusters plus a few far outliers or
a tiny separate clique, anisotropic blobs, moons and circles with outliers.

From the repository root::

    python -m benchmarks.degenerate [--seeds 5]
    python -m benchmarks.degenerate --suite dev [--seeds 1]   # or --suite check

Per case and seed: the smallest cluster of the default (``NTClustering(C)``: ``labels_``) and
of KMeans (n_init=10) and SpectralClustering (k-NN affinity), and their ARI % on the
generated clusters (the added outliers left out of the score). ``--suite``: the data sets of
the development suite (or its check set) fit as ``benchmarks.devsuite`` fits the default; the
smallest cluster of its partition (``initial_labels_``) and CA / NMI of ``labels_``. Labels
only to score.
"""
import argparse
import warnings

import numpy as np
from sklearn.cluster import KMeans, SpectralClustering
from sklearn.datasets import make_blobs, make_circles, make_moons
from sklearn.metrics import adjusted_rand_score

from ntnumba import NTClustering


def _add(X, y, extra):
    return np.r_[X, extra], np.r_[y, np.full(len(extra), -1)]


def cases(seed):
    """``{name: (X, y, C)}``; ``y == -1`` marks the added outliers."""
    rng = np.random.default_rng(seed)
    out = {}
    for d in (2, 50):
        X, y = make_blobs(300, d, centers=3, cluster_std=1.0, center_box=(-10, 10),
                          random_state=seed)
        out[f"3 blobs {d}-D + 3 outliers"] = (*_add(X, y, 60.0 * rng.standard_normal((3, d))), 3)
        far = 40.0 * np.ones(d) + 0.3 * rng.standard_normal((6, d))
        out[f"3 blobs {d}-D + clique of 6"] = (*_add(X, y, far), 3)
        # a clique of 12 (a separate component of the k-NN graph) by 3 blobs of 300
        centres = np.zeros((3, d))
        centres[1, 0] = centres[2, 1] = 7.0
        y3 = np.repeat(np.arange(3), 300)
        X3 = centres[y3] + rng.standard_normal((900, d))
        far = 30.0 + 0.3 * rng.standard_normal((12, d))
        out[f"3 blobs x 300 {d}-D + clique of 12"] = (*_add(X3, y3, far), 3)
    X, y = make_blobs(1200, 2, centers=4, cluster_std=1.0, center_box=(-10, 10),
                      random_state=seed)
    far = 40.0 + 0.3 * rng.standard_normal((12, 2))
    out["4 blobs x 300 2-D + clique of 12"] = (*_add(X, y, far), 4)
    X, y = make_blobs(400, 20, centers=4, cluster_std=1.0, random_state=seed)
    out["4 blobs 20-D + 4 outliers"] = (*_add(X, y, 50.0 * rng.standard_normal((4, 20))), 4)
    X, y = make_blobs(300, 2, centers=2, cluster_std=1.0, random_state=seed)
    out["2 blobs 2-D + 2 outliers"] = (*_add(X, y, 40.0 * rng.standard_normal((2, 2))), 2)
    X, y = make_blobs(450, 2, centers=3, random_state=seed)
    X = X @ np.array([[0.6, -0.6], [-0.4, 0.8]])
    out["anisotropic 3"] = (X, y, 3)
    out["anisotropic 3 + 3 outliers"] = (*_add(X, y, 25.0 * rng.standard_normal((3, 2))), 3)
    X, y = make_moons(400, noise=0.06, random_state=seed)
    out["moons + 3 outliers"] = (*_add(X, y, 6.0 * rng.standard_normal((3, 2))), 2)
    X, y = make_circles(400, noise=0.04, factor=0.5, random_state=seed)
    out["circles + 3 outliers"] = (*_add(X, y, 5.0 * rng.standard_normal((3, 2))), 2)
    return out


def fits(X, C, seed):
    """``{method: labels}``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"default": NTClustering(C, random_state=seed).fit(X).labels_,
                "kmeans": KMeans(C, n_init=10, random_state=seed).fit_predict(X),
                "spectral": SpectralClustering(C, affinity="nearest_neighbors",
                                               random_state=seed).fit_predict(X)}


def suite(which, seeds):
    """The smallest cluster of the default's partition on every set of ``which``."""
    from . import devsuite
    print("| set | n, C | smallest cluster per seed | CA / NMI % |\n|---|---|---|---|")
    for name in devsuite.SETS[which]:
        X, y = devsuite.load_case(name)
        C = int(y.max()) + 1
        small, ca, nmi = [], [], []
        for seed in range(seeds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = NTClustering(C, random_state=seed).fit(X)
            small.append(str(np.bincount(est.initial_labels_, minlength=C).min()))
            sc = devsuite.scores(y, est.labels_)
            ca.append(sc["ca"])
            nmi.append(sc["nmi"])
        print(f"| {name} | {len(y)}, {C} | {' '.join(small)} | {np.mean(ca):.1f} / "
              f"{np.mean(nmi):.1f} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--suite", choices=("dev", "check"), default=None)
    a = ap.parse_args(argv)
    if a.suite:
        return suite(a.suite, a.seeds)
    rows = {}
    for seed in range(a.seeds):
        for name, (X, y, C) in cases(seed).items():
            inl = y >= 0
            for m, lab in fits(X, C, seed).items():
                small = int(np.bincount(lab, minlength=C).min())
                rows.setdefault((name, m), []).append(
                    (small, 100.0 * adjusted_rand_score(y[inl], lab[inl]), len(y)))
    print("| case | method | smallest cluster per seed | mean ARI % (inliers) |")
    print("|---|---|---|---|")
    for (name, m), r in rows.items():
        print(f"| {name} (n={r[0][2]}) | {m} | {' '.join(str(s) for s, _, _ in r)} | "
              f"{np.mean([v for _, v, _ in r]):.1f} |")


if __name__ == "__main__":
    main()

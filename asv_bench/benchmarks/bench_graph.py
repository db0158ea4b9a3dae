"""The graph partition of the default fit (``assign="graph"``), through the estimator.

Sizes: blobs of ``n`` samples in 100 dimensions; ``n = 2000`` always, ``20000`` with
``NTNUMBA_BENCH_LARGE=1``. The fit runs with ``learn_transform=False`` (``A = I``, so
``M = N = 100``): its time is that of the partition (the k-NN search, the choice of the shared
directions, the spectral partition and the representation rules) and of one iteration in 100
dimensions. ``track_ari`` is the partition's (``initial_labels_``) ARI against the blobs.
"""
import os

import numpy as np

NS = [2000] + ([20000] if os.environ.get("NTNUMBA_BENCH_LARGE", "") not in ("", "0") else [])


def _problem(n, N=100, C=10):
    from sklearn.datasets import make_blobs
    X, y = make_blobs(n, n_features=N, centers=C, cluster_std=2.0, random_state=0)
    return X.astype(np.float64), y, C


def _fit(X, C):
    from ntnumba import NTClustering
    return NTClustering(C, learn_transform=False, random_state=0).fit(X)


class GraphFit:
    params = [NS]
    param_names = ["n"]
    timeout = 600

    def setup(self, n):
        self.X, self.y, self.C = _problem(n)
        _fit(self.X[:200], self.C)   # compile in setup

    def time_graph_fit(self, n):
        _fit(self.X, self.C)

    def peakmem_graph_fit(self, n):
        _fit(self.X, self.C)

    def track_ari(self, n):
        from sklearn.metrics import adjusted_rand_score
        return adjusted_rand_score(self.y, _fit(self.X, self.C).initial_labels_)

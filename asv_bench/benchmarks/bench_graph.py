"""The graph of the default fit (ntnumba/_graph.py): k-NN search, partition, peak memory.

Sizes: blobs of ``n`` samples in 100 dimensions (rms-scaled, as the fit sees them; the graph
works in the data's dimension); ``n = 2000`` always, ``20000`` with ``NTNUMBA_BENCH_LARGE=1``.
``track_ari`` is the partition's ARI against the blobs.
"""
import os

import numpy as np

from ntnumba import _driver
from ntnumba import _graph as G

NS = [2000] + ([20000] if os.environ.get("NTNUMBA_BENCH_LARGE", "") not in ("", "0") else [])


def _problem(n, N=100, C=10):
    from sklearn.datasets import make_blobs
    X, y = make_blobs(n, n_features=N, centers=C, cluster_std=2.0, random_state=0)
    return X / np.sqrt(np.mean(X ** 2)), y, C


class GraphPartition:
    params = [NS]
    param_names = ["n"]
    timeout = 600

    def setup(self, n):
        self.Q, self.y, self.C = _problem(n)
        G.graph_partition(self.Q[:200], self.C, random_state=0)   # compile in setup

    def time_graph_partition(self, n):
        with _driver.blas_context():
            G.graph_partition(self.Q, self.C, random_state=0)

    def peakmem_graph_partition(self, n):
        with _driver.blas_context():
            G.graph_partition(self.Q, self.C, random_state=0)

    def track_ari(self, n):
        from sklearn.metrics import adjusted_rand_score
        with _driver.blas_context():
            return adjusted_rand_score(self.y, G.graph_partition(self.Q, self.C,
                                                                 random_state=0)[0])


class KnnSearch:
    params = [NS]
    param_names = ["n"]
    timeout = 600

    def setup(self, n):
        X, _, _ = _problem(n)
        self.Y = G.graph_rows(X, *G.shared_directions(X, 0))
        G.knn_search(self.Y[:100], 5, exclude_self=True)   # compile in setup

    def time_knn_exact(self, n):
        with _driver.blas_context():
            G.knn_search(self.Y, 5, exclude_self=True, method="exact")

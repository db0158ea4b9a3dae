"""A fit with fewer samples than features: time and peak memory.

``python -m benchmarks.wide_fit [--rows 100] [--resolution 112x92] [--max-iter 1]``: the first
``--rows`` images of ORL at ``--resolution`` (``load_orl``; the originals, 112 x 92 pixels:
N = 10,304 features) fitted by ``NTClustering(10, learn_transform=True, random_state=0)``
(``n_components="auto"``, 2100: the model of the rows' span, unless ``--components``) after a
warm-up fit on tiny data (the kernels compiled or loaded from numba's cache outside the timed
fit). Prints one JSON line: the fit's wall time, the process's peak resident set
(``ru_maxrss``) and the load average before and after. Run it under ``/usr/bin/time -v`` for
the whole process.
"""
import argparse
import json
import resource
import time

import numpy as np

from .common import load_average, positive_int


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.wide_fit",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=positive_int, default=100,
                    help="images of ORL fitted (default 100)")
    ap.add_argument("--resolution", default="112x92",
                    help="pixels of the images, HxW (default 112x92, the originals)")
    ap.add_argument("--components", type=positive_int, default=None,
                    help="n_components (default: 'auto', 2100)")
    ap.add_argument("--max-iter", type=positive_int, default=1,
                    help="iterations of the fit (default 1, the estimator's default)")
    a = ap.parse_args(argv)
    from ntnumba import NTClustering
    from .datasets import load_orl
    X = np.ascontiguousarray(load_orl(a.resolution)[0][:a.rows], dtype=np.float64)
    M = "auto" if a.components is None else a.components
    load_before = load_average()
    NTClustering(3, n_components=8, random_state=0).fit(
        np.random.default_rng(0).standard_normal((30, 4)))
    t = time.perf_counter()
    model = NTClustering(10, n_components=M, learn_transform=True,
                         max_iter=a.max_iter, random_state=0).fit(X)
    seconds = time.perf_counter() - t
    out = {"shape": list(X.shape), "n_components": model.components_.shape[0],
           "max_iter": a.max_iter,
           "fit_s": round(seconds, 2),
           "peak_rss_MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
           "cluster_sizes": np.bincount(model.labels_).tolist(),
           "load_before": load_before, "load_after": load_average()}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()

"""SHA-256 of the outputs of a fixed set of fits: the check that a refactor changes no output.

From the repository root, on each of two commits, then compare the files::

    python -m benchmarks.fingerprint /tmp/before.json
    python -m benchmarks.fingerprint /tmp/after.json
    diff /tmp/before.json /tmp/after.json

Fits: the default on iris, 600 x 12 blobs, 500 digits and the shipped COIL-20 (n_components
1024), a chunked fit, the objective and paper rules and ``learn_transform=False``; for each the
fitted arrays, ``predict`` (with and without rejection), ``predict_proba``, ``transform``,
``score`` and ``predict`` of the model saved and loaded again.
"""
import hashlib
import json
import os
import sys
import tempfile
import warnings

import numpy as np
from sklearn.datasets import load_digits, load_iris, make_blobs

import ntnumba
from ntnumba import NTClustering
from ntnumba.datasets import load_demo


def h(a):
    a = np.ascontiguousarray(np.asarray(a))
    key = a.tobytes() + str(a.dtype).encode() + str(a.shape).encode()
    return hashlib.sha256(key).hexdigest()[:16]


def run(out, name, est, X, chunk=None, extra=True):
    est.fit(X, chunk_size=chunk)
    r = {"labels_": h(est.labels_), "components_": h(est.components_)}
    for a in ("dissimilarity_", "similarity_", "objective_history_", "initial_labels_",
              "outlier_scores_", "probabilities_", "similarity_labels_"):
        if hasattr(est, a):
            r[a] = h(getattr(est, a))
    if extra:
        Xt = X[:50]
        r["predict"] = h(est.predict(Xt))
        r["predict_rej"] = h(est.predict(Xt, reject=0.1))
        r["proba"] = h(est.predict_proba(Xt))
        r["transform"] = h(est.transform(Xt))
        r["score"] = repr(float(est.score(Xt)))
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.npz")
            est.save(p)
            m = ntnumba.load(p)
            r["load_predict"] = h(m.predict(Xt))
    out[name] = r


def main(path):
    warnings.simplefilter("ignore")
    out = {}
    Xi = load_iris().data
    Xb, _ = make_blobs(600, 12, centers=5, random_state=3)
    Xd = load_digits().data[:500].astype(float)
    run(out, "iris_default", NTClustering(3, random_state=0), Xi)
    run(out, "blobs_default", NTClustering(5, random_state=1), Xb)
    run(out, "digits_default", NTClustering(10, random_state=2), Xd)
    run(out, "blobs_chunked", NTClustering(5, random_state=1), Xb, chunk=150)
    run(out, "iris_objective", NTClustering(3, assign="objective", init="k-means++", max_iter=3,
                                            n_components=16, random_state=0), Xi)
    run(out, "blobs_paper", NTClustering(5, assign="paper", max_iter=2, n_components=32,
                                         random_state=0), Xb)
    run(out, "iris_nolearn", NTClustering(3, learn_transform=False, random_state=0), Xi)
    Xc, _ = load_demo()
    run(out, "coil_default", NTClustering(20, n_components=1024, random_state=0), Xc,
        extra=False)
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    print("written", path)


if __name__ == "__main__":
    main(sys.argv[1])

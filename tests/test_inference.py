"""predict, transform, score and predict_proba: over blocks of rows (the same results, bounded
memory: tracemalloc peaks of the numpy allocations against the block size), training rows
recognised in any dtype, sparse input."""
import dataclasses
import os
import tracemalloc

import numpy as np
import pytest

import ntnumba
from ntnumba import NTClustering
from ntnumba.estimators import clustering
from ntnumba.estimators.clustering import candidate_scores, fitted_parts, set_fitted


def blobs(n, N, seed, k=4):
    centers = 4.0 * np.random.default_rng(0).standard_normal((k, N))
    rng = np.random.default_rng(seed)
    return centers[rng.integers(0, k, n)] + rng.standard_normal((n, N))


def peak(run):
    tracemalloc.start()
    try:
        out = run()
        return tracemalloc.get_traced_memory()[1], out
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def models():
    X = blobs(300, 6, 0)
    return X, [NTClustering(4, n_components=64, random_state=0).fit(X),
               NTClustering(4, assign="objective", init="k-means++", n_components=32,
                            max_iter=2, random_state=0).fit(X)]


@pytest.mark.parametrize("rule", [0, 1])
def test_blocks_give_the_one_block_results(models, monkeypatch, rule):
    """Many blocks (the budget of a few rows) against one block (the whole input at once)."""
    X, ests = models
    est, Xt = ests[rule], blobs(500, 6, 1)
    calls = (lambda: est.predict(Xt), lambda: est.predict(Xt, reject="auto"),
             lambda: est.predict_proba(Xt), lambda: est.transform(Xt),
             lambda: est.score(Xt), lambda: candidate_scores(est, Xt))
    monkeypatch.setattr(clustering, "INFERENCE_BYTES", 1 << 40)
    whole = [f() for f in calls]
    monkeypatch.setattr(clustering, "INFERENCE_BYTES", 20000)   # 10 to 20 rows a block
    blocked = [f() for f in calls]
    for a, b in zip(whole[:2], blocked[:2]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(whole[2:], blocked[2:]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(est.predict(X), est.labels_)


@pytest.mark.slow
def test_predict_memory_is_bounded_by_the_block(monkeypatch):
    """Default model (M = 2100): before, predict of 5000 rows allocated Q and Y (5000 x 2100,
    84 MB each); the traced peak is now a few blocks of INFERENCE_BYTES."""
    X = blobs(400, 20, 0)
    est = NTClustering(4, random_state=0).fit(X)
    budget = 1 << 22
    monkeypatch.setattr(clustering, "INFERENCE_BYTES", budget)
    Xt = blobs(5000, 20, 1)
    for call in (est.predict, est.score, est.predict_proba,
                 lambda A: est.transform(A[:200])):   # transform's output is n x M
        nbytes, _ = peak(lambda: call(Xt))
        assert nbytes < 4 * budget + 4 * Xt.nbytes, (call, nbytes)


def test_many_candidates_are_bounded_per_row(tmp_path):
    """A model file declaring n_clusters = n_similarity = 1000 (10^6 candidates per sample):
    before, predict of 30 rows allocated every candidate's scores at once (about 1 GB)."""
    X = blobs(50, 3, 0)
    small = NTClustering(2, n_similarity=1, assign="objective", init="k-means++",
                         learn_transform=False, random_state=0).fit(X)
    attrs, fitted = fitted_parts(small)
    rng = np.random.default_rng(0)
    attrs["dissimilarity_"] = rng.standard_normal((1000, 3))
    attrs["similarity_"] = rng.standard_normal((1000, 3))
    est = NTClustering(1000, n_similarity=1000, assign="objective", learn_transform=False)
    params = dataclasses.replace(fitted.params, n_clusters=1000, n_similarity=1000)
    set_fitted(est, attrs, dataclasses.replace(fitted, params=params))
    model = ntnumba.load(est.save(os.path.join(tmp_path, "big.npz")))
    row = 40 * 1000 * 1000
    nbytes, labels = peak(lambda: model.predict(X[:30]))
    assert nbytes < 2 * row
    # the same labels as the brute force over every candidate, row by row
    for i in (0, 17):
        scores = candidate_scores(model, X[i:i + 1])[0]
        assert labels[i] == np.unravel_index(np.argmin(scores), scores.shape)[0]


def test_too_many_candidates_are_refused():
    with pytest.raises(ValueError, match="n_clusters x n_similarity: at most"):
        NTClustering(5000, n_similarity=5000).fit(np.zeros((3, 2)))


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits
    X = load_digits().data[:500] / 16.0
    return X + 0.01 * np.random.default_rng(0).standard_normal(X.shape)


@pytest.mark.parametrize("scaling", ["rms", "standard"])
def test_training_rows_are_recognised_in_another_dtype(digits, scaling):
    """Before, a training row matched only byte for byte in the training dtype: predict of a
    float32 copy of float64 training data (or the reverse) differed from labels_ on 4 (rms)
    and 2 (standard) of these 500 rows, and -0.0 for 0.0 on 4 and 2."""
    m = NTClustering(10, n_components=256, scaling=scaling, random_state=0).fit(digits)
    X32 = digits.astype(np.float32)
    np.testing.assert_array_equal(m.predict(X32), m.labels_)
    # a matched row scores as the training row (leave-one-out): exactly outlier_scores_
    np.testing.assert_array_equal(candidate_scores(m, X32)[:, 0], m.outlier_scores_)
    near = np.nextafter(X32, np.float32(np.inf))   # not equal: the vote, itself included
    assert np.all(candidate_scores(m, near)[:, 0] < m.outlier_scores_)
    m32 = NTClustering(10, n_components=256, scaling=scaling, random_state=0).fit(X32)
    np.testing.assert_array_equal(m32.predict(X32.astype(np.float64)), m32.labels_)
    zeros = digits.copy()
    zeros[:, 0] = 0.0        # the first pixel of every digit is 0
    mz = NTClustering(10, n_components=256, scaling=scaling, random_state=0).fit(zeros)
    zeros[:, 0] = -0.0
    np.testing.assert_array_equal(mz.predict(zeros), mz.labels_)


def documents(n, seed, V=400, k=3):
    """TF-IDF rows of documents drawn from k topics (sparse CSR, about 8% stored)."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfTransformer
    topics = np.random.default_rng(0).dirichlet(np.full(V, 0.05), size=k)
    rng = np.random.default_rng(seed)
    counts = np.array([rng.multinomial(40, topics[c]) for c in rng.integers(0, k, n)])
    return TfidfTransformer().fit_transform(sparse.csr_matrix(counts))


def sparse_copy(X):
    return X.data.copy(), X.indices.copy(), X.indptr.copy()


@pytest.mark.parametrize("rule", ["graph", "objective"])
def test_sparse_documents_as_their_dense_copies(rule):
    """fit, fit_predict, partial_fit, predict, transform, score and predict_proba of CSR and
    CSC input give what the dense copies give, and leave the input as it was."""
    X, Xt = documents(240, 0), documents(60, 1)
    X_before, Xt_before = sparse_copy(X), sparse_copy(Xt)
    kw = dict(n_components=400, random_state=0) if rule == "graph" else dict(
        n_components=400, assign="objective", init="k-means++", max_iter=2, random_state=0)
    sp, dense = NTClustering(3, **kw).fit(X), NTClustering(3, **kw).fit(X.toarray())
    np.testing.assert_array_equal(sp.labels_, dense.labels_)
    np.testing.assert_array_equal(NTClustering(3, **kw).fit_predict(X.tocsc()), dense.labels_)
    for A in (Xt, Xt.tocsc(), Xt.astype(np.float32)):
        D = A.toarray()
        np.testing.assert_array_equal(sp.predict(A, reject="auto"),
                                      dense.predict(D, reject="auto"))
        np.testing.assert_array_equal(sp.transform(A), dense.transform(D))
        np.testing.assert_array_equal(sp.predict_proba(A), dense.predict_proba(D))
        assert sp.score(A) == dense.score(D)
    np.testing.assert_array_equal(sp.predict(X), sp.labels_)
    np.testing.assert_array_equal(NTClustering(3, **kw).partial_fit(X).partial_fit(Xt).labels_,
                                  NTClustering(3, **kw).partial_fit(X.toarray()).partial_fit(
                                      Xt.toarray()).labels_)
    for a, b in zip(X_before + Xt_before, sparse_copy(X) + sparse_copy(Xt)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dok", "lil", "dia", "bsr", "int64"])
def test_every_sparse_format(fmt):
    """What sklearn's check_estimator_sparse_matrix asks, per format (see test_estimator.py)."""
    X = documents(40, 0, V=30)
    D = X.toarray()
    if fmt == "int64":
        X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    else:
        X = X.asformat(fmt)
    model = NTClustering(3, n_components=30, random_state=0)
    np.testing.assert_array_equal(model.fit(X).labels_, model.fit(D).labels_)
    np.testing.assert_array_equal(model.predict_proba(X), model.predict_proba(D))


def test_sparse_predict_densifies_a_block_at_a_time(monkeypatch):
    from scipy import sparse
    X = documents(300, 0)
    model = NTClustering(3, n_components=400, random_state=0).fit(X)
    monkeypatch.setattr(clustering, "INFERENCE_BYTES", 1 << 20)   # 100-odd rows a block
    rows = []
    toarray = sparse.csr_matrix.toarray
    monkeypatch.setattr(sparse.csr_matrix, "toarray",
                        lambda self, *a, **kw: rows.append(self.shape[0]) or toarray(
                            self, *a, **kw))
    for call in (model.predict, model.transform, model.score, model.predict_proba):
        rows.clear()
        call(X)
        assert sum(rows) == X.shape[0] and max(rows) < X.shape[0] / 2, (call, rows)


def test_sparse_fit_checks_its_dense_copy(monkeypatch):
    from ntnumba.partition import graph
    X = documents(100, 0)
    monkeypatch.setattr(graph, "available_memory", lambda: 10 ** 5)
    with pytest.raises(MemoryError, match="dense copy of the sparse matrix.*chunk_size"):
        NTClustering(3, n_components=400).fit(X)
    monkeypatch.undo()
    # in blocks of rows, each densified: the in-memory fit's labels (every row a reference)
    labels = NTClustering(3, n_components=400, random_state=0).fit(X, chunk_size=40).labels_
    dense = NTClustering(3, n_components=400, random_state=0).fit(X.toarray()).labels_
    assert np.mean(labels == dense) == 1.0
    X.data[3] = np.nan
    with pytest.raises(ValueError, match="X: the stored values of the sparse matrix: contains"):
        NTClustering(3, n_components=400).fit(X)


def test_cli_fits_and_predicts_a_sparse_npz(tmp_path, capsys):
    from scipy import sparse
    from ntnumba import cli
    from ntnumba.datasets import load_file
    X = documents(90, 0)
    sparse.save_npz(tmp_path / "docs.npz", X)
    sparse.save_npz(tmp_path / "coo.npz", X.tocoo(), compressed=False)
    Xr, y = load_file(tmp_path / "coo.npz")
    assert sparse.issparse(Xr) and y is None and (Xr != X).nnz == 0
    with pytest.raises(ValueError, match="sparse matrix.*image_shape not used"):
        load_file(tmp_path / "docs.npz", image_shape=(20, 20))
    model, out = str(tmp_path / "m.npz"), str(tmp_path / "p.csv")
    assert cli.main(["fit", str(tmp_path / "docs.npz"), "-k", "3", "--n-components", "400",
                     "--seed", "0", "-o", model]) == 0
    assert "90 samples x 400 features, no labels; sparse" in capsys.readouterr().err
    assert cli.main(["predict", model, str(tmp_path / "coo.npz"), "-o", out]) == 0
    fitted = NTClustering(3, n_components=400, random_state=0).fit(X.toarray())
    np.testing.assert_array_equal(np.loadtxt(out, dtype=np.int64, skiprows=1), fitted.labels_)
    np.testing.assert_array_equal(ntnumba.load(model).labels_, fitted.labels_)


def test_dask_estimator_takes_sparse_input():
    distributed = pytest.importorskip("distributed")
    from ntnumba.dask import NTClustering as DaskNTClustering
    X = documents(120, 0)
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as c, \
            distributed.Client(c):
        model = DaskNTClustering(3, n_components=400, random_state=0).fit(X)
        np.testing.assert_array_equal(model.labels_.compute(), model.predict(X))
    dense = NTClustering(3, n_components=400, random_state=0).fit(X.toarray())
    np.testing.assert_array_equal(model.predict(X), dense.labels_)


@pytest.mark.parametrize("assign", ["objective", "paper", "graph"])
def test_rows_far_outside_the_training_scale_are_refused(assign):
    Xf = np.random.default_rng(0).standard_normal((60, 5))
    Xf += np.repeat(np.eye(5)[:3] * 4, 20, axis=0)
    m = NTClustering(3, assign=assign, n_components=10, random_state=0).fit(Xf)
    assert (m.predict(Xf[:5] * 1e10) >= 0).all()
    for method in (m.predict, m.transform, m.score, m.predict_proba):
        with pytest.raises(ValueError, match="X: values up to .* overflow"):
            method(Xf[:5] * 1e160)

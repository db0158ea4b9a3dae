"""scikit-learn conventions of NTClustering: output containers and feature names, predict on the
training data, soft assignment scores (``predict_proba``, ``probabilities_``,
``outlier_scores_``) against slow references."""
import math

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import ntnumba
from ntnumba import NTClustering

import naive_graph
from naive import assign_loop, candidate_enum


def _blobs(spread=1.5, n=40, N=8, seed=0):
    """Three overlapping Gaussian blobs: the graph's partition and its k-NN vote disagree on a
    few samples (the case predict must handle)."""
    rng = np.random.default_rng(seed)
    return np.repeat(spread * rng.standard_normal((3, N)), n, axis=0) + \
        rng.standard_normal((3 * n, N))


@pytest.fixture(scope="module")
def X():
    return _blobs()


@pytest.fixture(scope="module")
def graph_model(X):
    return NTClustering(3, n_components=24, random_state=0).fit(X)


@pytest.fixture(scope="module")
def objective_case():
    """A model of the objective rule small enough (M = 8) for the brute-force candidates."""
    X4 = _blobs(N=4)
    return NTClustering(3, n_components=8, assign="objective", init="k-means++", max_iter=5,
                        random_state=0).fit(X4), X4


# ------------------------------------------------------------------------------ containers
def test_get_feature_names_out(graph_model):
    names = graph_model.get_feature_names_out()
    assert names.tolist() == [f"ntclustering{i}" for i in range(24)]
    with pytest.raises(NotFittedError):
        NTClustering(3).get_feature_names_out()


def test_set_output_pandas(X):
    pd = pytest.importorskip("pandas")
    model = NTClustering(3, n_components=24, random_state=0).set_output(transform="pandas")
    Y = model.fit_transform(X)
    assert isinstance(Y, pd.DataFrame)
    assert Y.columns.tolist() == model.get_feature_names_out().tolist()
    default = NTClustering(3, n_components=24, random_state=0).fit(X)
    np.testing.assert_array_equal(Y.to_numpy(), default.transform(X))
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])], index=np.arange(100, 220))
    out = model.fit(df).transform(df)
    assert out.index.tolist() == df.index.tolist()      # the input's index is kept
    # predict is not a transform: labels stay an array
    assert isinstance(model.predict(df), np.ndarray)


# ------------------------------------------------------------------------------ predict
@pytest.mark.parametrize("kw", [{}, dict(assign="objective", init="k-means++", max_iter=3),
                                dict(assign="paper", init="random", max_iter=3)],
                         ids=["graph", "objective", "paper"])
def test_fit_then_predict_equals_fit_predict(X, kw):
    labels = NTClustering(3, n_components=24, random_state=0, **kw).fit_predict(X)
    model = NTClustering(3, n_components=24, random_state=0, **kw).fit(X)
    np.testing.assert_array_equal(model.predict(X), labels)
    np.testing.assert_array_equal(model.predict(X[::-1]), labels[::-1])   # any order


def test_graph_partition_is_not_the_vote():
    """Why predict has the training-row rule: the k-NN vote (predict_proba's argmax, which is
    the vote of the other training samples for a training row) differs from the partition on
    some training samples, and predict still returns the partition there."""
    X = _blobs(spread=1.0)  # more overlap: the partition and the vote differ on 4 samples
    graph_model = NTClustering(3, n_components=24, random_state=0).fit(X)
    vote = graph_model.predict_proba(X).argmax(axis=1)
    differ = np.flatnonzero(vote != graph_model.labels_)
    assert differ.size > 0
    np.testing.assert_array_equal(graph_model.predict(X[differ]), graph_model.labels_[differ])


# ------------------------------------------------------------------------------ soft scores
def _naive_codes(model, X):
    """The rows the graph rule compares for ``X``, from the public fitted attributes: scaled,
    centred, shared directions removed, and (8 features: the few-features rule) one constant
    coordinate, the median distance of a scaled training row from the training mean."""
    train = np.asarray(model._fitted.ref_X, dtype=np.float64)
    mu = train.mean(axis=0)
    c = float(np.median([math.sqrt(sum((v - m) ** 2 for v, m in zip(row, mu))) for row in train]))
    Qc = np.asarray(X, dtype=np.float64) * model.scale_ - model.shared_mean_
    for v in model.shared_components_:
        Qc = Qc - np.outer(Qc @ v, v)
    return np.c_[Qc, np.full(len(Qc), c)]


def _naive_vote(Yq, Yref, labels_ref, C, k, exclude=None):
    """Vote shares by loops: the k most similar references add max(S, 0) + 1e-12."""
    out = np.zeros((len(Yq), C))
    for i, y in enumerate(Yq):
        sims = []
        for j, z in enumerate(Yref):
            if exclude is not None and exclude[i] == j:
                continue
            sims.append((naive_graph.similarity(y, z), j))
        for s, j in sorted(sims, reverse=True)[:k]:
            out[i, labels_ref[j]] += max(s, 0.0) + 1e-12
        out[i] /= out[i].sum()
    return out


def test_graph_predict_proba_against_loops(graph_model, X):
    rng = np.random.default_rng(1)
    new = X[rng.choice(len(X), 6, replace=False)] + 0.3 * rng.standard_normal((6, X.shape[1]))
    m = graph_model
    ref = _naive_codes(m, X)
    expected = _naive_vote(_naive_codes(m, new), ref, m.labels_, 3, m.n_neighbors)
    np.testing.assert_allclose(m.predict_proba(new), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(m.predict(new), expected.argmax(axis=1))
    # training rows: the leave-one-out vote
    rows = np.arange(0, len(X), 10)
    loo = _naive_vote(ref[rows], ref, m.labels_, 3, m.n_neighbors, exclude=rows)
    np.testing.assert_allclose(m.predict_proba(X[rows]), loo, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(m.probabilities_[rows], loo[np.arange(rows.size),
                                                           m.labels_[rows]], rtol=1e-9)


def test_objective_predict_proba_against_brute_force(objective_case):
    """Softmax of minus the smallest cost per cluster, the costs by enumerating supports."""
    m, X4 = objective_case
    rng = np.random.default_rng(2)
    new = X4[rng.choice(len(X4), 5, replace=False)] + 0.5 * rng.standard_normal((5, 4))
    Q = (new * m.scale_) @ m.components_.T
    *_, scores = assign_loop(Q, m.dissimilarity_, m.similarity_, m.lambda0, m.lambda1,
                             "objective", m.lambda_a, candidate_enum)
    expected = np.empty((len(new), 3))
    for i in range(len(new)):
        s = [min(scores[i, k]) for k in range(3)]
        w = [math.exp(-(v - min(s))) for v in s]
        expected[i] = [v / sum(w) for v in w]
    np.testing.assert_allclose(m.predict_proba(new), expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(m.predict(new), expected.argmax(axis=1))


@pytest.mark.parametrize("which", ["graph", "objective"])
def test_training_attributes(which, X, graph_model, objective_case):
    m, X = (graph_model, X) if which == "graph" else objective_case
    P = m.predict_proba(X)
    assert P.shape == (len(X), 3) and np.allclose(P.sum(axis=1), 1.0) and (P >= 0).all()
    np.testing.assert_allclose(m.probabilities_, P[np.arange(len(X)), m.labels_], rtol=1e-9)
    assert m.outlier_scores_.shape == (len(X),)
    # predict's rejection thresholds exactly these scores
    t = float(np.median(m.outlier_scores_))
    np.testing.assert_array_equal(m.predict(X, reject=t) == -1, m.outlier_scores_ > t)
    if which == "graph":   # the threshold is the largest leave-one-out score
        assert m.reject_threshold_ == m.outlier_scores_.max()
        assert not (m.predict(X, reject="auto") == -1).any()


def test_soft_scores_survive_save_and_chunked_fit(graph_model, X, tmp_path):
    loaded = ntnumba.load(graph_model.save(tmp_path / "m"))
    np.testing.assert_array_equal(loaded.probabilities_, graph_model.probabilities_)
    np.testing.assert_array_equal(loaded.predict(X), graph_model.labels_)
    chunked = NTClustering(3, n_components=24, random_state=0).fit(X, chunk_size=50)
    np.testing.assert_array_equal(chunked.labels_, graph_model.labels_)
    np.testing.assert_allclose(chunked.probabilities_, graph_model.probabilities_, rtol=1e-6)
    np.testing.assert_allclose(chunked.outlier_scores_, graph_model.outlier_scores_, rtol=1e-6)
    np.testing.assert_array_equal(chunked.predict(X), chunked.labels_)


def test_partial_fit_sets_soft_scores(X):
    m = NTClustering(3, n_components=24, assign="objective", init="k-means++", random_state=0)
    for chunk in np.array_split(X[np.random.default_rng(0).permutation(len(X))], 3):
        m.partial_fit(chunk)
    assert m.probabilities_.shape == m.labels_.shape == (40,)


def test_dask_estimator_keeps_dask_arrays():
    pytest.importorskip("distributed")
    from ntnumba.dask import NTClustering as DaskNTClustering
    with pytest.raises(ValueError, match="set_output: .*from_dask_array"):
        DaskNTClustering(3).set_output(transform="pandas")


def test_chunked_fit_beyond_the_reference_set_predicts_its_labels(X, monkeypatch):
    """fit(X, chunk_size) with more samples than the graph's reference set: the samples outside
    it get the final model's vote, so predict(X) == labels_ there too (before: the vote of
    the initial map, which disagreed on 1.4% of 700 such samples)."""
    from ntnumba.engine import loop as _driver
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 30)
    model = NTClustering(3, n_components=24, random_state=0).fit(X, chunk_size=40)
    assert model._fitted.ref_X.shape[0] == 30
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    P = model.predict_proba(X)
    others = np.setdiff1d(np.arange(len(X)), model._fitted.state.graph["ref_rows"])
    assert others.size == len(X) - 30
    np.testing.assert_array_equal(P[others].argmax(axis=1), model.labels_[others])
    np.testing.assert_allclose(model.probabilities_, P[np.arange(len(X)), model.labels_],
                               rtol=1e-9)

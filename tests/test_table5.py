"""The Table 5 protocol of ``benchmarks/table5.py`` end to end on a tiny synthetic set, against
brute-force nearest neighbours, independent fits and the obvious split and map."""
import json

import numpy as np
import pytest

from benchmarks import table5
from ntnumba import NTClustering

pytestmark = pytest.mark.slow  # several fits of a 2100-component map


def _data():
    """Three unbalanced classes (30, 20, 10) of 12 features, overlapping enough for errors."""
    rng = np.random.RandomState(3)
    y = np.repeat([0, 1, 2], [30, 20, 10])
    X = 0.6 * rng.standard_normal((3, 12))[y] + rng.standard_normal((60, 12))
    return X, y


def _brute_nn(Ztr, ytr, Zte, yte):
    d = ((Zte[:, None, :] - Ztr[None, :, :]) ** 2).sum(axis=2)
    return 100.0 * np.mean(ytr[d.argmin(axis=1)] == yte)


def test_split_is_stratified_and_disjoint():
    _, y = _data()
    for seed in range(3):
        tr, te = table5.split(y, seed)
        assert np.intersect1d(tr, te).size == 0
        assert np.array_equal(np.sort(np.r_[tr, te]), np.arange(y.size))
        assert np.bincount(y[te]).tolist() == [9, 6, 3]  # 30% of 30, 20, 10


def test_every_accuracy_is_the_brute_force_one_of_an_independent_fit():
    X, y = _data()
    rec = table5.run_seed(X, y, 0, [1, 2])
    tr, te = table5.split(y, 0)
    acc = rec["acc"]
    assert acc["raw"] == _brute_nn(X[tr], y[tr], X[te], y[te])
    assert acc["raw"] < 100.0  # the set is not trivial: the comparisons below can differ
    m2 = NTClustering(3, random_state=0, max_iter=2).fit(X[tr])
    assert rec["transform"]["2"]["acc"] == _brute_nn(m2.transform(X[tr]), y[tr],
                                                      m2.transform(X[te]), y[te])
    assert rec["transform"]["2"]["n_iter"] == 2
    assert rec["transform"]["1"]["n_iter"] == 1
    # A_0: the fit's first draw, N(0, 1) rows of unit norm (random_state 0 -> the seed drawn)
    seed = np.random.RandomState(0).randint(np.iinfo(np.int32).max, size=1)[0]
    A0 = np.random.RandomState(seed).standard_normal((2100, 12))
    A0 /= np.linalg.norm(A0, axis=1, keepdims=True)
    assert acc["A0 x"] == _brute_nn(X[tr] @ A0.T, y[tr], X[te] @ A0.T, y[te])
    assert rec["initial_labels_match"]
    eye = NTClustering(3, random_state=0, learn_transform=False).fit(X[tr])
    assert acc["A = I"] == _brute_nn(eye.transform(X[tr]), y[tr], eye.transform(X[te]), y[te])


def test_the_replayed_initialisation_is_the_fits():
    """One iteration from ``initial_state`` gives the fitted parameters of ``max_iter=1``, and
    ``stage1_rows`` with the fitted parameters is ``transform``."""
    from ntnumba.engine import loop
    X, y = _data()
    model = NTClustering(3, random_state=1, max_iter=1).fit(X)
    Xs = X * model.scale_
    p, st, rng = table5.initial_state(model, Xs)
    assert np.array_equal(st.labels, model.initial_labels_)
    st1 = loop.run(Xs, st, p, rng)
    np.testing.assert_allclose(st1.A, model.components_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(st1.tau, model.dissimilarity_, rtol=0, atol=1e-12)
    Y = table5.stage1_rows(model, p, X[:20], model.components_, model.dissimilarity_,
                           model.similarity_)
    np.testing.assert_allclose(Y, model.transform(X[:20]), rtol=0, atol=1e-12)


def test_quick_command_writes_the_tables_and_the_results_section(tmp_path):
    (tmp_path / "results.md").write_text("# R\n\n" + "\n".join(table5.MARK) + "\n\n## After\n")
    res = table5.main(["--quick", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "table5.json").read_text())
    assert data["meta"]["seeds"] == [0, 1] and data["meta"]["iters"] == [1, 2]
    sm = data["sets"]["demo"]["summary"]
    runs = [r["transform"]["2"]["acc"] for r in res["sets"]["demo"]["runs"]]
    assert sm["transform 2"]["mean"] == pytest.approx(np.mean(runs))
    page = (tmp_path / "results.md").read_text()
    assert page.startswith("# R\n") and page.rstrip().endswith("## After")
    assert "## The learned transform" in page and page.count(table5.MARK[0]) == 1
    row = [ln for ln in (tmp_path / "table5.md").read_text().splitlines() if "COIL-20 demo" in ln]
    assert f"{sm['raw']['mean']:.1f} ± {sm['raw']['std']:.1f}" in row[0]

"""The development suite (``python -m benchmarks.reproduce --suite dev``), the held-out loaders
and ``initial_labels_``."""
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.io import loadmat

from benchmarks import devsuite, reproduce
from benchmarks.datasets import get_data_home, load_isolet, load_mnist_subset, load_usps
from ntnumba import NTClustering
from ntnumba.metrics import clustering_accuracy, nmi


def _data_home():
    try:
        return get_data_home()
    except FileNotFoundError:
        return Path("no-data-folder")


SHARED = _data_home()  # NTNUMBA_DATA or ../shared/data
needs_data = pytest.mark.skipif(not (SHARED / "usps").is_dir(),
                                reason="real data sets not found (NTNUMBA_DATA, ../shared/data)")


@needs_data
def test_held_out_loaders_match_the_files():
    X, y = load_usps(data_home=SHARED)
    raw = loadmat(SHARED / "usps" / "USPS_1854_16x16.mat")
    assert X.shape == (1854, 256) and np.bincount(y).tolist()[:2] == [310, 253]
    # per-image normalisation of the stored rows (row-major 16x16 kept as is)
    r = raw["X"][5]
    np.testing.assert_allclose(X[5], (r - r.mean()) / r.std(), atol=1e-9)
    X, y = load_isolet(data_home=SHARED)
    assert X.shape == (1560, 617) and np.all(np.bincount(y) == 60)
    X, y = load_mnist_subset(data_home=SHARED, normalize=False)
    m = loadmat(SHARED / "mnist" / "MNIST_subset604.mat")
    np.testing.assert_array_equal(X[7], m["X"][:, 7])  # one column per image
    assert y.min() == 0 and y.max() == 9 and y[0] == int(m["gnd"][0, 0]) - 1


def test_suite_hook_routes_only_dev():
    assert devsuite.suite_hook(["--quick"]) is None
    assert devsuite.suite_hook(["--suite", "paper"]) is None
    with pytest.raises(SystemExit):
        devsuite.suite_hook(["--suite", "nope"])


@pytest.mark.slow
def test_dev_suite_records_what_independent_fits_give(tmp_path, monkeypatch):
    names = "iris-raw,blobs-5d-small"
    small = {"n_components": 24}  # the default's rule at a small M: a fast test
    monkeypatch.setattr(devsuite, "NT_CONFIGS", {"ntnumba (default)": small})
    res = reproduce.main(["--suite", "dev", "--datasets", names, "--seeds", "1",
                          "--cache", "", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "dev_results.json").read_text())
    md = (tmp_path / "dev_results.md").read_text()
    assert list(data["datasets"]) == names.split(",") and res["meta"]["seeds"] == [0]
    for title in ("## Summary", "## Where the default wins and loses", "## Every number",
                  "## Provenance of the defaults", "iris-raw", "KMeans(n_init=10)"):
        assert title in md
    X, y = devsuite.load_case("iris-raw")
    assert X.shape == (150, 4)
    d = data["datasets"]["iris-raw"]
    labels = NTClustering(3, random_state=0, **small).fit(X).labels_
    run = d["methods"]["ntnumba (default)"]["runs"][0]
    assert run["ca"] == pytest.approx(100.0 * clustering_accuracy(y, labels))
    assert run["nmi"] == pytest.approx(100.0 * nmi(y, labels))
    from sklearn.cluster import KMeans
    km = KMeans(3, n_init=10, random_state=0).fit_predict(X)
    assert d["peers"]["KMeans(n_init=10)"]["ca"]["mean"] == pytest.approx(
        100.0 * clustering_accuracy(y, km))
    # HDBSCAN ran on these few features; the verdict follows the recorded means
    assert "HDBSCAN" in d["peers"]
    v = devsuite.verdicts(d)
    assert v["vs_kmeans"] == (run["ca"] >= d["peers"]["KMeans(n_init=10)"]["ca"]["mean"] and
                              run["nmi"] >= d["peers"]["KMeans(n_init=10)"]["nmi"]["mean"])


def test_peer_cache_is_used(tmp_path):
    cache = devsuite._Cache(str(tmp_path / "c.json"))
    X, y = devsuite.load_case("blobs-5d-small")
    first = devsuite.run_peer("Ward", X, y, 8, [0], cache)
    key = next(iter(cache.data))
    cache.data[key]["ca"] = -1.0  # a cached record is returned as stored, not recomputed
    again = devsuite.run_peer("Ward", X, y, 8, [0], devsuite._Cache(cache.path))
    assert first["ca"]["mean"] > 0 and again["ca"]["mean"] != -1.0  # file not rewritten yet
    cache.put(key, cache.data[key])
    again = devsuite.run_peer("Ward", X, y, 8, [0], devsuite._Cache(cache.path))
    assert again["ca"]["mean"] == -1.0


def test_initial_labels_are_the_first_partition():
    rng = np.random.default_rng(0)
    X = np.repeat(3.0 * rng.standard_normal((3, 8)), 30, axis=0) + rng.standard_normal((90, 8))
    kw = dict(n_components=16, assign="objective", init="k-means++", random_state=0)
    labels = []  # the Stage-1 labels of every iteration
    more = NTClustering(3, max_iter=4, tol=0.0, **kw).fit(
        X, callback=lambda state: labels.append(np.array(state.labels)))
    # one iteration's Stage-1 labels (labels_ itself is Stage 1 again with the final parameters)
    np.testing.assert_array_equal(more.initial_labels_, labels[0])
    assert not np.array_equal(more.initial_labels_, labels[-1])  # learning moved them
    # the graph rule starts from its partition and keeps it
    g = NTClustering(3, n_components=16, random_state=0).fit(X)
    np.testing.assert_array_equal(g.initial_labels_, g.labels_)


def _rec(ca, nmi, ica=None, inmi=None):
    st = lambda v: {"mean": v, "std": 0.0}  # noqa: E731
    r = {"ca": st(ca), "nmi": st(nmi), "runs": []}
    if ica is not None:
        r["initial"] = {"ca": st(ica), "nmi": st(inmi)}
    return r


def test_targets_report_learning_against_the_initial_partition():
    peers = {"KMeans(n_init=10)": _rec(50.0, 50.0), "Ward": _rec(70.0, 60.0)}
    res = {"datasets": {
        "a": {"methods": {"ntnumba (default)": _rec(80.0, 70.0, 75.0, 71.0),
                          "ntnumba, A = I": _rec(74.0, 69.0)}, "peers": peers},
        "b": {"methods": {"ntnumba (default)": _rec(60.0, 55.0, 61.0, 54.0),
                          "ntnumba, A = I": _rec(61.0, 54.0)}, "peers": peers}}}
    g = devsuite.learning_gain(res, "ntnumba (default)")
    assert g["ca"] == pytest.approx((5.0 - 1.0) / 2) and g["nmi"] == pytest.approx(0.0)
    assert g["up"] == ["a"] and g["down"] == ["b"]
    text = "\n".join(devsuite.targets(res))
    assert "| 2 of 2 (met) |" in text            # both >= KMeans on CA and NMI
    assert "| 1 (not met) |" in text              # only "a" >= the best peer (Ward)
    assert "(+2.00), NMI 62.50 vs 62.50 (+0.00) (not met)" in text  # NMI not above
    assert "CA 70.00 vs 67.50, NMI 62.50 vs 61.50 (met)" in text    # vs A = I
    # a difference that rounds to +0.00 at the page's precision is not "above"
    res["datasets"]["b"]["methods"]["ntnumba, A = I"] = _rec(59.998, 54.998)
    res["datasets"]["a"]["methods"]["ntnumba, A = I"] = _rec(80.0, 70.0)
    text = "\n".join(devsuite.targets(res))
    assert "CA 70.00 vs 70.00, NMI 62.50 vs 62.50 (not met)" in text


@pytest.mark.slow
def test_check_set_is_its_own_page(tmp_path, monkeypatch):
    monkeypatch.setattr(devsuite, "NT_CONFIGS", {"ntnumba (default)": {"n_components": 24}})
    reproduce.main(["--suite", "dev", "--set", "check", "--datasets", "c-wine-6f,c-circles",
                    "--seeds", "1", "--cache", "", "--out", str(tmp_path)])
    md = (tmp_path / "dev_check.md").read_text()
    assert md.startswith("# Held-out check set") and "## About this set" in md
    assert not (tmp_path / "dev_results.md").exists()
    X, y = devsuite.load_case("c-wine-6f")
    assert X.shape == (178, 6) and np.allclose(X.std(axis=0), 1.0) and y.max() == 2
    assert not set(devsuite.CHECK) & set(devsuite.SUITE)
    with pytest.raises(SystemExit):  # a suite set is not in the check set
        reproduce.main(["--suite", "dev", "--set", "check", "--datasets", "iris-raw",
                        "--out", str(tmp_path)])


def test_a_failed_fit_is_scored_as_one_cluster_and_listed(tmp_path, monkeypatch):
    monkeypatch.setattr(devsuite, "NT_CONFIGS", {"ntnumba (default)": {"n_components": 24},
                                                 "broken": {"n_components": -1}})
    res = reproduce.main(["--suite", "dev", "--datasets", "iris-raw", "--seeds", "1",
                          "--methods", "ntnumba (default)|broken", "--cache", "",
                          "--out", str(tmp_path)])
    run = res["datasets"]["iris-raw"]["methods"]["broken"]["runs"][0]
    assert "n_components" in run["error"]
    assert run["ca"] == pytest.approx(100.0 / 3) and run["nmi"] == pytest.approx(0.0)
    md = (tmp_path / "dev_results.md").read_text()
    assert "## Failed fits" in md and "| iris-raw | broken | 0 |" in md


def test_a_peer_whose_package_is_missing_is_skipped_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(devsuite, "NT_CONFIGS", {"ntnumba (default)": {"n_components": 24}})
    monkeypatch.setattr(devsuite, "PEERS", ("KMeans(n_init=10)", "FINCH"))
    monkeypatch.setitem(devsuite.PEER_PACKAGES, "FINCH", ("no_such_module_25", ("finch-clust",)))
    res = reproduce.main(["--suite", "dev", "--datasets", "iris-raw", "--seeds", "1",
                          "--cache", "", "--out", str(tmp_path)])
    assert list(res["datasets"]["iris-raw"]["peers"]) == ["KMeans(n_init=10)"]
    md = (tmp_path / "dev_results.md").read_text()
    assert "**Peer not run**: FINCH: skipped, finch-clust is not installed" in md


@pytest.mark.skipif(not (SHARED / "text").is_dir(), reason="RELATHE not found")
def test_documents_are_sparse_tfidf_with_a_dense_copy():
    X, X_sparse, y = devsuite.load_inputs("relathe")
    assert X.shape == X_sparse.shape == (1427, 4322) and np.bincount(y).tolist() == [779, 648]
    np.testing.assert_allclose(X_sparse.toarray(), X)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0)  # TF-IDF rows of unit l2 norm

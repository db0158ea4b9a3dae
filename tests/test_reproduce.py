"""Smoke test of ``python -m benchmarks.reproduce --quick`` (shipped demo data, one run)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import reproduce
from ntnumba import NTClustering
from ntnumba.metrics import clustering_accuracy, nmi

pytestmark = pytest.mark.slow  # a reproduction run and a subprocess


@pytest.mark.slow
def test_quick_reproduction_writes_consistent_results(tmp_path):
    res = reproduce.main(["--quick", "--out", str(tmp_path)])
    md = (tmp_path / "results.md").read_text()
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["meta"]["datasets"] == ["demo"] and data["meta"]["runs"] == 1
    d = data["datasets"]["demo"]
    # every section is present, in the JSON and in the report
    assert set(d) >= {"default", "peers", "knn", "rejection", "ablation"}
    assert set(d["ablation"]) == set(reproduce.QUICK_ABLATION)
    for title in ("## Clustering", "### Targets", "## k-NN classification", "## Ablation",
                  "## Rejection option", "ntnumba (default)", "KMeans(n_init=10)"):
        assert title in md
    # the recorded numbers are the ones an independent fit of the same configuration gives
    X, y = reproduce.load("demo")
    labels = NTClustering(5, n_components=300, random_state=0).fit(X).labels_
    run = d["default"]["runs"][0]
    assert run["ca"] == 100.0 * clustering_accuracy(y, labels)
    assert run["nmi"] == 100.0 * nmi(y, labels)
    assert d["default"]["ca"]["mean"] == run["ca"]
    from sklearn.cluster import KMeans
    km = KMeans(5, n_init=10, random_state=0).fit_predict(X)
    assert d["peers"]["KMeans(n_init=10)"]["ca"]["mean"] == 100.0 * clustering_accuracy(y, km)
    for key in ("raw", "nt_y", "nt_code"):
        assert 0.0 <= d["knn"][key] <= 100.0
    assert res["meta"]["total_minutes"] > 0
    assert np.isfinite(d["rejection"]["threshold"])


@pytest.mark.slow
def test_missing_data_fails_in_one_line_and_writes_nothing(tmp_path):
    """Run from another folder (the checkout on the path) without the data: one line,
    status 1, no ./docs and no output folder created."""
    empty = tmp_path / "no-data"
    empty.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, NTNUMBA_DATA=str(empty), PYTHONPATH=path)
    res = subprocess.run([sys.executable, "-m", "benchmarks.reproduce", "--datasets", "orl"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith("python -m benchmarks.reproduce: error: ORL (24x24): ")
    assert "NTNUMBA_DATA" in lines[0] and "--quick" in lines[0]
    assert os.listdir(work) == []

"""The large-data benchmark's summary of repeated fits (``benchmarks.bench_large``)."""
import pytest

from benchmarks.bench_large import main, median_fit


def test_median_fit_takes_medians_and_keeps_every_time():
    runs = [{"time": 5.0, "cpu": 4.0, "peak_MB": 30.0, "ARI": 0.5, "NMI": 0.6},
            {"time": 1.0, "cpu": 9.0, "peak_MB": 10.0, "ARI": 0.5, "NMI": 0.6},
            {"time": 2.0, "cpu": 1.0, "peak_MB": 20.0, "ARI": 0.5, "NMI": 0.6},
            {"time": 4.0, "cpu": 3.0, "peak_MB": 40.0, "ARI": 0.5, "NMI": 0.6}]
    out = median_fit(runs)
    assert (out["time"], out["cpu"], out["peak_MB"]) == (3.0, 3.5, 25.0)
    assert out["times"] == [5.0, 1.0, 2.0, 4.0] and out["cpus"] == [4.0, 9.0, 1.0, 3.0]
    assert out["repeat"] == 4 and out["ARI"] == 0.5
    assert runs[0]["time"] == 5.0  # the runs are not changed


def test_median_fit_reports_a_failed_fit():
    out = median_fit([{"time": 1.0, "cpu": 1.0, "peak_MB": 1.0},
                      {"error": "timeout after 9 s"}])
    assert out == {"error": "timeout after 9 s"}


def test_repeat_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        main(["--repeat", "0"])
    assert "--repeat" in capsys.readouterr().err


def test_unknown_method_is_named_before_any_fit(capsys):
    with pytest.raises(SystemExit):
        main(["--methods", "ntnumba,Kmeans", "--data", "blobs", "--n", "100"])
    err = capsys.readouterr().err
    assert "unknown Kmeans" in err and "KMeans" in err

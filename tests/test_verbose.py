"""``verbose``: one line per phase in plain words with its time, the true sample count, a total
with numba's compilation apart; the graph's internals only at ``verbose >= 2``."""
import re
import time

from numba.core import event as numba_event

from ntnumba import NTClustering
from ntnumba.engine import loop

from test_stream import _blobs

INTERNALS = ("graph: ", "shared directions", "not kept", "eigensolver")


def _lines(capsys):
    return [e for e in capsys.readouterr().err.splitlines() if not e.startswith("compiling")]


def test_phases_true_sample_count_and_total(capsys, monkeypatch):
    """More samples than the reference sample (lowered to 50): the header counts all 120."""
    monkeypatch.setattr(loop, "REFERENCE_SIZE", 50)
    X, _ = _blobs(n_per=40, n_features=20)
    NTClustering(3, n_components=24, random_state=0, verbose=1).fit(X)
    err = _lines(capsys)
    names = [re.sub(r": \d+\.\ds$", "", e) for e in err]
    assert names[:4] + names[5:6] == ["fit: 120 samples x 20 features, 3 clusters",
                                      "feature statistics (X^T X)",
                                      "graph partition of 50 samples",
                                      "k-NN vote of the other 70 samples",
                                      "labels and training scores"], err
    assert re.match(r"iteration    1  objective \S+  elapsed \d+\.\ds  eta", err[4]), err
    assert re.fullmatch(r"total \d+\.\ds( \(and .* compiling .*\))?", err[-1]), err
    assert len(err) == 7, err
    assert not [e for e in err if any(w in e for w in INTERNALS)]
    NTClustering(3, n_components=24, random_state=0, verbose=2).fit(X)
    err = _lines(capsys)
    assert all(any(w in e for e in err) for w in INTERNALS), err
    assert err[0] == "fit: 120 samples x 20 features, 3 clusters"


def test_compilation_announced_once_and_timed_apart(capsys, monkeypatch):
    """Two (nested) compilations, as numba reports them, inside one phase: one message, their
    time in the total and not in the phase."""
    gram = loop.gram

    def compiling_gram(src):
        with numba_event.trigger_event("numba:compile", data={}):
            with numba_event.trigger_event("numba:compile", data={}):
                time.sleep(0.3)
        with numba_event.trigger_event("numba:compile", data={}):
            time.sleep(0.3)
        return gram(src)
    monkeypatch.setattr(loop, "gram", compiling_gram)
    X, _ = _blobs()
    NTClustering(3, n_components=24, random_state=0, verbose=1, assign="objective",
                 init="k-means++").fit(X)
    err = capsys.readouterr().err.splitlines()
    assert [e for e in err if e.startswith("compiling")] == [
        "compiling numba kernels (first call only: it can take tens of seconds; cached for "
        "later calls) ..."]
    phase = next(e for e in err if e.startswith("feature statistics"))
    assert float(phase.split(": ")[1][:-1]) < 0.6, err
    total = re.fullmatch(r"total \d+\.\ds \(and (\d+\.\d)s compiling numba kernels, first "
                         r"call only\)", err[-1])
    assert total and float(total.group(1)) >= 0.6, err
    NTClustering(3, n_components=24, random_state=0, verbose=0).fit(X)
    assert capsys.readouterr().err == ""

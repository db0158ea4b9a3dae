"""``verbose``: one line per phase in plain words with its time, the true sample count, a total
with numba's compilation apart; the graph's internals only at ``verbose >= 2``; progress bars
on a terminal."""
import io
import re
import sys
import time

from numba.core import event as numba_event

from ntnumba import NTClustering
from ntnumba.engine import loop
from ntnumba.estimators import clustering

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

    def compiling_gram(src, p=None):
        with numba_event.trigger_event("numba:compile", data={}):
            with numba_event.trigger_event("numba:compile", data={}):
                time.sleep(0.3)
        with numba_event.trigger_event("numba:compile", data={}):
            time.sleep(0.3)
        return gram(src, p)
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


class Terminal(io.StringIO):
    """A stream that says it is a terminal (tqdm draws its bars only there)."""

    def isatty(self):
        return True


def bars(text, desc):
    """``(done, total)`` of every drawing of the tqdm bars ``desc`` in ``text``."""
    return [(int(a), int(b)) for a, b in re.findall(desc + r": +\d+%\|[^|]*\| (\d+)/(\d+) ",
                                                    text)]


def test_progress_bar_of_the_iterations_with_verbose_on_a_terminal(monkeypatch, capsys):
    """verbose=1: a bar of the iterations reaching 3/3 on a terminal, the lines intact as the
    terminal shows them (the text after the last carriage return); verbose=0: nothing; not a
    terminal: the lines alone."""
    X, _ = _blobs()
    kw = dict(n_components=24, random_state=0, max_iter=3, tol=0.0)
    for verbose in (1, 0):
        monkeypatch.setattr(sys, "stderr", Terminal())
        NTClustering(3, verbose=verbose, **kw).fit(X)
        out = sys.stderr.getvalue()
        if verbose == 0:
            assert out == ""
            continue
        assert bars(out, "iterations")[-1] == (3, 3) and bars(out, "samples") == [], out
        shown = [ln.split("\r")[-1] for ln in out.split("\n")]
        assert len([ln for ln in shown if re.match(r"iteration +\d +objective ", ln)]) == 3, out
        assert shown[-2].startswith("total ") and shown[-1] == "", out
    monkeypatch.undo()
    NTClustering(3, verbose=1, **kw).fit(X)
    assert "\r" not in capsys.readouterr().err


def eager_bars(monkeypatch):
    """Bars drawn at every update (tqdm's delay and minimum interval 0) on a terminal stderr."""
    bar = loop.Report.bar
    monkeypatch.setattr(loop.Report, "bar", lambda self, *a, **kw: bar(
        self, *a, **{**kw, "delay": 0, "mininterval": 0, "miniters": 1}))
    monkeypatch.setattr(sys, "stderr", Terminal())


def test_progress_bars_of_the_passes_over_blocks_and_of_predict(monkeypatch):
    """Chunked fit and predict in blocks: bars of the samples done reaching all 120."""
    eager_bars(monkeypatch)
    X, _ = _blobs()
    model = NTClustering(3, n_components=24, random_state=0, max_iter=2, verbose=1)
    model.fit(X, chunk_size=50)
    out = sys.stderr.getvalue()
    assert (120, 120) in bars(out, "samples") and bars(out, "iterations")[-1] == (2, 2), out
    for verbose in (1, 0):
        monkeypatch.setattr(sys, "stderr", Terminal())
        monkeypatch.setattr(clustering, "INFERENCE_BYTES", 1)   # one row a block
        model.set_params(verbose=verbose).predict(X[:7])
        out = sys.stderr.getvalue()
        assert bars(out, "samples")[-1] == (7, 7) if verbose else out == "", out

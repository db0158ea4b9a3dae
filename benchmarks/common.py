"""What the commands of the harness share: the paper's data sets, scores, progress lines.

``reproduce``, ``devsuite`` and ``bench_large`` import this module and no other module of the
harness, except that ``reproduce`` hands ``--suite dev`` to ``devsuite``: no import cycle.
"""
import argparse
import os
import sys
import time


def log(msg):
    """One progress line on standard error, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load_average():
    """The load average of the machine as text ("?" where the platform has none)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - not on every platform
        return "?"


def positive_int(text):
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def load(name):
    """``(X, y)`` of a data set at the paper's resolution (``"demo"``: the shipped copy)."""
    from ntnumba.datasets import load_demo
    from . import datasets
    if name == "demo":
        X, y = load_demo("16x16")
        keep = y < 5
        return X[keep], y[keep]
    loader = {"coil20": datasets.load_coil20, "orl": datasets.load_orl,
              "yaleb": datasets.load_yaleb}[name]
    return loader("paper")


def scores(y, labels):
    """CA, NMI and ARI in percent (noise label -1 counts as an error in CA)."""
    from ntnumba.metrics import ari, clustering_accuracy, nmi
    return {"ca": 100.0 * clustering_accuracy(y, labels), "nmi": 100.0 * nmi(y, labels),
            "ari": 100.0 * ari(y, labels)}


def table(header, rows):
    """A Markdown table: the ``header`` cells, a rule, then one line per row of ``rows``."""
    return "".join(f"| {' | '.join(cells)} |\n" for cells in [header, *rows]).replace(
        "\n", "\n|" + "---|" * len(header) + "\n", 1)

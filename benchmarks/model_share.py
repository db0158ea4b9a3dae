"""The paper's model's share of the default fit, at the paper's sizes, side by side in one run.

Issue 26's target: at the paper's sizes the NT model (Stages 1-3, ``A``, ``tau``, ``nu``) at
most 25% of the default fit. For COIL-20, ORL and Extended Yale B at the paper's sizes
(``benchmarks.datasets``), in one process, alternating which runs first, ``--repeats`` times:
``NTClustering(C, random_state=0).fit(X)`` (the default) and the same with
``learn_transform=False`` (the same ``labels_``: the graph partition, no model to learn). Both
warmed up first. Processor time (every thread); the share is ``1 - partition / default`` of
the medians.

Run from the repository root (``NTNUMBA_DATA`` the data folder)::

    python -m benchmarks.model_share [--repeats 3]
"""
import argparse
import statistics
import time
import warnings

from .common import load_average


def _time(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t


def main(argv=None):
    from ntnumba import NTClustering

    from . import datasets
    ap = argparse.ArgumentParser(prog="python -m benchmarks.model_share", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    print(f"load before: {load_average()}")
    print(f"{'data':<8} {'n x N':>11} {'default s':>10} {'partition s':>12} {'model share':>12}")
    out = {}
    for name in ("coil20", "orl", "yaleb"):
        X, y = getattr(datasets, f"load_{name}")()
        C = int(y.max()) + 1
        runs = {"d": lambda: NTClustering(C, random_state=0).fit(X),
                "p": lambda: NTClustering(C, learn_transform=False, random_state=0).fit(X)}
        for fn in runs.values():
            fn()
        t = {"d": [], "p": []}
        for r in range(args.repeats):
            for k in (("d", "p") if r % 2 == 0 else ("p", "d")):
                t[k].append(_time(runs[k]))
        d, p = statistics.median(t["d"]), statistics.median(t["p"])
        out[name] = 1.0 - p / d
        print(f"{name:<8} {X.shape[0]:>5} x {X.shape[1]:<4} {d:>10.2f} {p:>12.2f} "
              f"{100 * out[name]:>11.1f}%", flush=True)
    print(f"load after: {load_average()}")
    return out


if __name__ == "__main__":
    main()

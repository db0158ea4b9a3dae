"""The paper's Table 5 as the check of the learned transform: ``python -m benchmarks.table5``.

For every data set and seed ``s``: a stratified 70/30 split (``ntnumba.metrics.knn_split``,
``random_state=s``), ``NTClustering(C, random_state=s)`` (C = number of classes, every other
parameter at its default) fitted on the 70%, then the 1-NN accuracy (scikit-learn's
``KNeighborsClassifier(1)``, Euclidean) of the test rows against the training rows in:

* ``transform`` of the fitted model, one fit per ``max_iter`` of ``--iters`` (not one
  ``warm_start`` fit continued: over 30 iterations its pieces differ from an uninterrupted fit,
  ORL seed 0: ``components_`` by 4e-4, 1-NN 92.5 against 93.3), with its processor time;
* ``raw``: the rows as the estimator sees them, ``X * scale_`` (``scaling="rms"`` multiplies by
  one scalar, which leaves 1-NN unchanged);
* ``A0 x``: the untrained map ``A_0`` (``n_components x n_features``, i.i.d. N(0, 1) rows scaled to
  unit norm, the fit's first draw) applied to the scaled rows;
* ``A0 Stage 1``: what ``transform`` gives before any learning (``max_iter=0``): Stage 1 with
  ``A_0`` and the initial ``tau``, ``nu`` for the partition's clusters;
* ``A = I``: ``transform`` of ``NTClustering(C, learn_transform=False)`` (one iteration), the
  public estimator without a learned map.

No public route reaches ``A_0`` (``max_iter`` must be >= 1, ``learn_transform=False`` is ``A = I``,
the fit's callback sees the state after the first update): :func:`initial_state` replays the
fit's initialisation through the estimator's private ``_params`` and
``ntnumba.engine.loop.initialise`` (checked: its partition is the model's ``initial_labels_``,
and one iteration from it gives the fitted ``A`` of ``max_iter=1``, ``tests/test_table5.py``).

Writes ``<out>/table5.md`` and ``<out>/table5.json``; with ``--out docs`` also the section of
``docs/results.md`` between its ``table5`` markers. Usage::

    python -m benchmarks.table5 --out docs                  # every set, 5 seeds, 1,3,10,30
    python -m benchmarks.reproduce --table5 --out docs      # the same
    python -m benchmarks.table5 --datasets orl --seeds 2 --iters 1,3 --out /tmp/t5
    python -m benchmarks.table5 --quick --out /tmp/t5       # shipped demo data, 2 seeds
"""
import argparse
import datetime
import json
import os
import platform
import re
import sys
import time
import warnings

import numpy as np

from .common import load, load_average, log, table

#: name -> description; data from ``benchmarks.devsuite.load_case`` (``demo``: the shipped copy)
SETS = {
    "coil20": "COIL-20, 20x25 (paper)",
    "orl": "ORL, 24x24 (paper)",
    "yaleb": "Extended Yale B, 21x21 (paper)",
    "coil20-bilin": "COIL-20, 20x25 bilinear (dev suite)",
    "yaleb-bilin": "Extended Yale B, 21x21 bilinear (dev suite)",
    "usps": "USPS 1854, 16x16 (dev suite)",
    "mnist": "MNIST subset 604, 28x28 (dev suite)",
    "digits": "scikit-learn digits, 8x8 (dev suite)",
    "pixraw10P": "pixraw10P faces, 100x100 (dev suite)",
    "demo": "COIL-20 demo, 5 objects, 16x16 (shipped)",
}
#: the representations compared with ``transform`` (keys of a run's ``acc``)
BASELINES = ("raw", "A0 x", "A0 Stage 1", "A = I")
#: the thread settings recorded with a run (the machine is shared: run with 1 each)
THREADS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
MARK = ("<!-- table5:start -->", "<!-- table5:end -->")


def load_set(name):
    """``(X, y)`` of a data set of :data:`SETS`."""
    if name == "demo":
        return load("demo")
    from .devsuite import load_case
    return load_case(name)


def split(y, seed, test_size=0.3):
    """The stratified split of seed ``seed``: sorted, disjoint ``(train, test)`` indices."""
    from ntnumba.metrics import knn_split
    return knn_split(y, test_size=test_size, random_state=seed)


def nn_accuracy(Ztr, ytr, Zte, yte):
    """1-NN accuracy (%) of the test rows ``Zte`` against the training rows (Euclidean)."""
    from sklearn.neighbors import KNeighborsClassifier
    clf = KNeighborsClassifier(n_neighbors=1, metric="euclidean").fit(Ztr, ytr)
    return 100.0 * float(clf.score(Zte, yte))


def initial_state(model, Xs):
    """``(params, state, rng)`` of the initialisation of ``model``'s fit on the scaled rows ``Xs``
    (``A_0``, ``tau_0``, ``nu_0``, the partition): the fit's first draws replayed (private
    route, see the module docs; ``n_init=1`` and at most 20,000 rows, the defaults' case)."""
    from sklearn.utils import check_random_state
    from ntnumba.engine import loop
    if model.n_init != 1 or Xs.shape[0] > loop.REFERENCE_SIZE:
        raise ValueError("initial_state: n_init=1 and at most 20000 rows only")
    p = model._params(Xs.shape[1])
    seed = check_random_state(model.random_state).randint(np.iinfo(np.int32).max, size=1)[0]
    rng = np.random.RandomState(seed)
    return p, loop.initialise(Xs, p, rng), rng


def stage1_rows(model, p, X, A, tau, nu):
    """Stage 1 of the rows ``X`` (unscaled) with ``A``, ``tau``, ``nu`` for the clusters
    ``model.predict(X)``: ``model.transform(X)`` when they are the fitted ones."""
    from ntnumba.engine import passes
    Xs = X * X.dtype.type(model.scale_)
    return passes.stage1(passes.compute_Q(Xs, A, True), tau, nu, p, model.predict(X))[2]


def _fit(model, X):
    """Fit (warnings silenced); ``(processor s, wall s)``."""
    c, w = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X)
    return time.process_time() - c, time.perf_counter() - w


def run_seed(X, y, seed, iters):
    """One split: accuracies of every representation and the fit times."""
    from ntnumba import NTClustering
    C = int(np.unique(y).size)
    tr, te = split(y, seed)
    rec = {"seed": seed, "n_train": int(tr.size), "n_test": int(te.size), "acc": {},
           "transform": {}}
    acc = rec["acc"]
    for k in iters:
        model = NTClustering(C, random_state=seed, max_iter=k)
        cpu, wall = _fit(model, X[tr])
        rec["transform"][str(k)] = {
            "acc": nn_accuracy(model.transform(X[tr]), y[tr], model.transform(X[te]), y[te]),
            "n_iter": int(model.n_iter_), "cpu_s": cpu, "wall_s": wall}
        if k == iters[0]:  # the baselines of this model's scaling and initialisation
            s = X.dtype.type(model.scale_)
            rec["scale"] = float(model.scale_)
            acc["raw"] = nn_accuracy(X[tr] * s, y[tr], X[te] * s, y[te])
            p, st, _ = initial_state(model, X[tr] * s)
            rec["initial_labels_match"] = bool(np.array_equal(st.labels, model.initial_labels_))
            acc["A0 x"] = nn_accuracy((X[tr] * s) @ st.A.T, y[tr], (X[te] * s) @ st.A.T, y[te])
            Y0 = [stage1_rows(model, p, X[r], st.A, st.tau, st.nu) for r in (tr, te)]
            acc["A0 Stage 1"] = nn_accuracy(Y0[0], y[tr], Y0[1], y[te])
    eye = NTClustering(C, random_state=seed, learn_transform=False)
    c, w = _fit(eye, X[tr])
    acc["A = I"] = nn_accuracy(eye.transform(X[tr]), y[tr], eye.transform(X[te]), y[te])
    rec["A = I"] = {"cpu_s": c, "wall_s": w}
    return rec


def _stats(values):
    v = np.asarray(values, dtype=np.float64)
    return {"mean": float(v.mean()), "std": float(v.std()), "values": [float(x) for x in v]}


def summarise(runs, iters):
    """Mean and std over the seeds of every accuracy and fit time."""
    out = {b: _stats([r["acc"][b] for r in runs]) for b in BASELINES}
    for k in map(str, iters):
        out[f"transform {k}"] = _stats([r["transform"][k]["acc"] for r in runs])
        out[f"cpu {k}"] = _stats([r["transform"][k]["cpu_s"] for r in runs])
        out[f"wall {k}"] = _stats([r["transform"][k]["wall_s"] for r in runs])
    out["cpu A = I"] = _stats([r["A = I"]["cpu_s"] for r in runs])
    return out


def run_set(X, y, seeds, iters):
    """Every seed of one data set: ``{"runs": [...], "summary": {...}}``."""
    runs = []
    for s in seeds:
        runs.append(run_seed(X, y, s, iters))
        r = runs[-1]
        log("  seed {}: raw {:.1f} A0 x {:.1f} A0 Stage 1 {:.1f} A = I {:.1f} transform {}".format(
            s, *(r["acc"][b] for b in BASELINES), ", ".join(
                f"{k}: {v['acc']:.1f} ({v['cpu_s']:.1f} s)" for k, v in r["transform"].items())))
    return {"runs": runs, "summary": summarise(runs, iters)}


# ----------------------------------------------------------------------------- the report
def _pm(st):
    return f"{st['mean']:.1f} ± {st['std']:.1f}"


def tables(res):
    """The accuracy table, the fit-time table and the count of sets where ``transform`` is at
    or above each baseline, as Markdown."""
    iters, sets = res["meta"]["iters"], res["sets"]
    head = ["data set; n x N, C"] + list(BASELINES) + [f"transform, {k} it." for k in iters]
    rows = []
    for name, d in sets.items():
        sm = d["summary"]
        best = max(sm[c]["mean"] for c in list(BASELINES) + [f"transform {k}" for k in iters])
        cells = [_pm(sm[c]) for c in list(BASELINES) + [f"transform {k}" for k in iters]]
        cells = [f"**{c}**" if c.startswith(f"{best:.1f} ") else c for c in cells]
        rows.append([f"{SETS[name]}; {d['n']} x {d['N']}, C = {d['C']}"] + cells)
    out = ["1-NN accuracy %, mean ± sd over the seeds (best of the row in bold):", "",
           table(head, rows)]
    rows = [[SETS[name]] + [f"{d['summary'][f'transform {k}']['mean'] - raw:+.1f}" for k in iters]
            for name, d in sets.items() for raw in [d["summary"]["raw"]["mean"]]]
    out += ["`transform` minus `raw`, points of mean accuracy:", "",
            table(["data set"] + [f"{k} it." for k in iters], rows)]
    rows = [[SETS[name]] + [_pm(d["summary"][f"cpu {k}"]) for k in iters]
            + [_pm(d["summary"]["cpu A = I"])] for name, d in sets.items()]
    out += ["Processor time of the fit, s (mean ± sd over the seeds; numba compiled before):",
            "", table(["data set"] + [f"max_iter={k}" for k in iters] + ["A = I"], rows)]
    head = ["transform at or above"] + [f"{k} it." for k in iters]
    rows = [[b] + [str(sum(d["summary"][f"transform {k}"]["mean"] >= d["summary"][b]["mean"]
                           for d in sets.values())) + f" of {len(sets)}" for k in iters]
            for b in BASELINES]
    out += ["Data sets where the mean accuracy of `transform` is at or above that of each "
            "representation:", "", table(head, rows)]
    return "\n".join(out)


def describe(res):
    """The paragraph saying what ran (command, seeds, machine, skipped sets)."""
    m = res["meta"]
    skipped = "; ".join(f"{SETS[k]}: {v}" for k, v in res["skipped"].items())
    return (f"Command: `{m['command']}` ({m['date']}, ntnumba {m['ntnumba']}, "
            f"scikit-learn {m['sklearn']}, {m['machine']}, nice {m['nice']}, "
            + ", ".join(f"{k}={v}" for k, v in m["threads"].items()) + "; load average "
            f"at the start {m['load_start']}, at the end {m['load_end']}; {m['minutes']:.1f} "
            f"min). Seeds {m['seeds']} (split and `random_state`), `max_iter` in {m['iters']}."
            + (f" Skipped: {skipped}." if skipped else ""))


#: the module's description of the protocol, in Markdown (the page's second paragraph)
PROTOCOL = re.sub(r":func:|``", lambda m: "`" if m.group(0) == "``" else "",
                  __doc__.split("\n\n", 1)[1].split("Writes")[0].strip())


def write(res, out):
    """``table5.json`` and ``table5.md`` in ``out``, and the section of ``results.md`` there
    (when it has the markers)."""
    with open(os.path.join(out, "table5.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    md = ["# The learned transform against the raw rows and the untrained map (Table 5)", "",
          describe(res), "", PROTOCOL, "",
          tables(res), ""]
    with open(os.path.join(out, "table5.md"), "w") as fh:
        fh.write("\n".join(md))
    page = os.path.join(out, "results.md")
    if os.path.exists(page):
        with open(page) as fh:
            text = fh.read()
        if MARK[0] in text:
            text = re.sub(re.escape(MARK[0]) + ".*?" + re.escape(MARK[1]),
                          lambda _: section(res), text, flags=re.S)
            with open(page, "w") as fh:
                fh.write(text)


#: what the tables mean for the default ``max_iter`` (docs/research/table5-iterations.md)
READING = ("What this means for the default number of iterations, and what else was measured: "
           "[research/table5-iterations.md](research/table5-iterations.md).\n")


def section(res):
    """The section of ``results.md`` (between the markers)."""
    return "\n".join([MARK[0], "## The learned transform, over seeds and iterations (Table 5)",
                      "", describe(res) + " Protocol and every run: [table5.md](table5.md), "
                      "`table5.json`.", "", tables(res), READING, MARK[1]])


# ----------------------------------------------------------------------------- command
def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.table5", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=None,
                    help="comma-separated names of " + ", ".join(SETS) + " (default: all but "
                         "demo)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..n-1 (default 5)")
    ap.add_argument("--iters", default="1,3,10,30", help="max_iter settings, increasing")
    ap.add_argument("--max-features", type=int, default=3000,
                    help="skip data sets of more features (default 3000)")
    ap.add_argument("--quick", action="store_true", help="demo data, 2 seeds, iters 1,2")
    ap.add_argument("--out", default="table5-results", help="output folder (created)")
    ap.add_argument("--render", action="store_true",
                    help="only rewrite the pages from <out>/table5.json")
    args = ap.parse_args(argv)
    if args.render:
        with open(os.path.join(args.out, "table5.json")) as fh:
            res = json.load(fh)
        write(res, args.out)
        return res
    names = (args.datasets or ("demo" if args.quick else
                               ",".join(k for k in SETS if k != "demo"))).split(",")
    for n in names:
        if n not in SETS:
            ap.error(f"--datasets: unknown {n!r}; choose from {', '.join(SETS)}")
    iters = [int(k) for k in ("1,2" if args.quick else args.iters).split(",")]
    if any(k < 1 for k in iters) or iters != sorted(set(iters)):
        ap.error(f"--iters: increasing integers >= 1, got {args.iters!r}")
    seeds = list(range(args.seeds or (2 if args.quick else 5)))
    import sklearn
    from ntnumba import NTClustering, __version__
    t0 = time.perf_counter()
    res = {"meta": {"command": " ".join(["python -m benchmarks.table5"]
                                        + list(sys.argv[1:] if argv is None else argv)),
                    "date": datetime.datetime.now().isoformat(timespec="seconds"),
                    "ntnumba": __version__, "sklearn": sklearn.__version__,
                    "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                    "load_start": load_average(), "seeds": seeds, "iters": iters,
                    "nice": os.nice(0),
                    "threads": {v: os.environ.get(v, "unset") for v in THREADS}},
           "sets": {}, "skipped": {}}
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(0)  # numba compiled outside the timings (> 16 features: the
    warm = np.repeat(3 * rng.standard_normal((3, 40)), 30, axis=0)  # path of images)
    warm += rng.standard_normal(warm.shape)
    for kw in ({}, {"learn_transform": False}):
        _fit(NTClustering(3, random_state=0, **kw), warm)
    for name in names:
        X, y = load_set(name)
        if X.shape[1] > args.max_features:
            res["skipped"][name] = (f"{X.shape[1]} features > --max-features "
                                    f"{args.max_features}")
            log(f"{name}: skipped ({res['skipped'][name]})")
            continue
        log(f"{name}: {X.shape[0]} x {X.shape[1]}, {np.unique(y).size} classes")
        d = run_set(X, y, seeds, iters)
        d.update(n=int(X.shape[0]), N=int(X.shape[1]), C=int(np.unique(y).size))
        res["sets"][name] = d
        res["meta"].update(load_end=load_average(), minutes=(time.perf_counter() - t0) / 60)
        write(res, args.out)  # after every set: a partial result survives an interruption
    res["meta"].update(load_end=load_average(), minutes=(time.perf_counter() - t0) / 60)
    write(res, args.out)
    log(f"wrote {os.path.join(args.out, 'table5.md')} and table5.json")
    return res


if __name__ == "__main__":  # pragma: no cover
    main()

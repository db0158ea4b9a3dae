"""Reproduce the paper's experiments: ``python -m benchmarks.reproduce``.

Runs, in one process and on the same inputs (the loaders of :mod:`benchmarks.datasets` at the
paper's resolutions, every image normalised to zero mean and unit variance):

* ntnumba with its default configuration, ``--runs`` seeds (mean, std, fit time and time per
  iteration), with kappa(A) and mu(A) as in the paper's Table 1;
* the peers: scikit-learn ``KMeans(n_init=10)`` and ``SpectralClustering`` on a k-NN graph
  (scikit-learn's default ``n_neighbors=10``, and ``n_neighbors=5`` with ``cluster_qr``, the graph
  size and label assignment of ntnumba's default but on the raw pixels), same seeds;
* the paper's published numbers (its Tables 1-5) beside them;
* k-NN classification accuracy (paper's Table 5): 1-NN on a stratified 70/30 split, on the raw
  pixels and on the NT representations of a model fitted on the training part only;
* an ablation: assignment rule, learned A vs A = I, M, Cs, initialisation, the graph's pieces;
* a rejection check: synthetic outliers (Gaussian noise images) among held-out samples.

Writes ``<out>/results.md`` (tables, and PNG plots when matplotlib is installed) and
``<out>/results.json`` (every number). ``--quick`` is a small smoke version (the shipped COIL-20
demo copy, 5 objects at 16x16, one run, two ablation variants).

Usage::

    python -m benchmarks.reproduce                     # full run, writes ./reproduce-results/
    python -m benchmarks.reproduce --out docs          # the same, replacing the committed page
    python -m benchmarks.reproduce --datasets orl --runs 2 --out /tmp/r
    python -m benchmarks.reproduce --quick --out /tmp/r   # no data folder needed
    python -m benchmarks.reproduce --suite dev         # held-out data sets (devsuite.py)
    python -m benchmarks.reproduce --table5 --out docs # Table 5 over seeds, iterations (table5.py)

The data sets are read through :func:`benchmarks.datasets.get_data_home` (``NTNUMBA_DATA`` or
``../shared/data``; see ``docs/datasets.md``). When one is missing the command says so in one
line and exits with status 1 before creating anything.
"""
import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings

import numpy as np

from .common import load, log, scores

# --------------------------------------------------------------------------- the paper's numbers
#: Tables 1, 2 and 5 of Kostadinov et al. (2019): CA/NMI %, k-NN accuracy % on the NT
#: representations and on the original data, kappa(A), mu(A), seconds per iteration.
PAPER = {
    "coil20": {"ca": 89.2, "nmi": 91.2, "knn_nt": 97.1, "knn_raw": 94.0, "kappa": 16.0,
               "mu": 0.2e-5, "s_per_iter": 46.0},
    "orl": {"ca": 75.4, "nmi": 84.1, "knn_nt": 96.9, "knn_raw": 94.5, "kappa": 21.0,
            "mu": 0.3e-5, "s_per_iter": 48.0},
    "yaleb": {"ca": 96.8, "nmi": 95.3, "knn_nt": 96.8, "knn_raw": 93.4, "kappa": 31.0,
              "mu": 0.1e-5, "s_per_iter": 51.0},
}
#: Tables 3-4 of the paper: the state-of-the-art methods it compares with (CA %, NMI %).
PAPER_PEERS = {
    "CASS": {"coil20": (59.1, 64.1), "orl": (68.8, 78.1), "yaleb": (81.9, 78.1)},
    "GSC": {"coil20": (80.9, 87.5), "orl": (61.5, 76.2), "yaleb": (74.2, 75.0)},
    "NSLRR": {"coil20": (62.8, 75.6), "orl": (55.3, 74.5), "yaleb": (None, None)},
    "SDRAM": {"coil20": (86.3, 89.1), "orl": (70.6, 80.2), "yaleb": (92.3, 89.1)},
    "RGRSC": {"coil20": (88.1, 89.3), "orl": (76.3, 86.1), "yaleb": (95.2, 94.2)},
}
NAMES = {"coil20": "COIL-20 (20x25)", "orl": "ORL (24x24)", "yaleb": "Extended Yale B (21x21)",
         "demo": "COIL-20 demo (5 objects, 16x16)"}

#: Ablation variants: name -> (NTClustering keyword arguments, self_training, what it tests).
#: Variants of the alternating rules are capped at ``--ablation-iter`` iterations.
ABLATION = [
    ("default", {}, False, "the default configuration"),
    ("graph, no shared directions removed (n_shared=0)", {"n_shared": 0}, False,
     "stage: removal of the shared component"),
    ("graph, n_shared=8 fixed", {"n_shared": 8}, False, "stage: choice of r by the normalised cut"),
    ("graph, k=3", {"n_neighbors": 3}, False, "graph size"),
    ("graph, k=10", {"n_neighbors": 10}, False, "graph size"),
    ("graph, A = I (learn_transform=False)", {"learn_transform": False}, False,
     "learned A vs A = I"),
    ("graph, M=1024", {"n_components": 1024}, False, "M"),
    ("graph, Cs=1", {"n_similarity": 1}, False, "Cs"),
    ("graph, 10 iterations (partition fixed)", {"max_iter": 10}, False,
     "more A learning: labels unchanged, representation changes"),
    ("graph, self-training (re-partition after every A update, 5 it.)", {"max_iter": 5}, True,
     "graph recomputed from the learned A at every iteration"),
    ("objective rule, init=graph", {"assign": "objective", "init": "graph", "max_iter": None},
     False, "the graph's clusters as start of the paper's alternation"),
    ("objective rule, init=k-means++ (previous default)",
     {"assign": "objective", "init": "k-means++", "max_iter": None}, False, "initialisation"),
    ("objective rule, init=random", {"assign": "objective", "init": "random", "max_iter": None},
     False, "initialisation"),
    ("objective rule, A = I", {"assign": "objective", "init": "k-means++",
                               "learn_transform": False, "max_iter": None}, False,
     "learned A vs A = I"),
    ("objective rule, Cs=5", {"assign": "objective", "init": "k-means++", "n_similarity": 5,
                              "max_iter": None}, False, "Cs"),
    ("paper (literal): assign=paper, init=random, scaling=None",
     {"assign": "paper", "init": "random", "scaling": None, "max_iter": None}, False,
     "the paper read literally"),
    ("paper rule, init=graph", {"assign": "paper", "init": "graph", "max_iter": None}, False,
     "the paper's rule from a good start"),
]
QUICK_ABLATION = ("default", "paper (literal): assign=paper, init=random, scaling=None")


#: Default output folder (relative to the working directory; never the package's docs/).
OUT = "reproduce-results"


# --------------------------------------------------------------------------- helpers
def _stats(values):
    v = np.asarray(values, dtype=np.float64)
    return {"mean": float(np.mean(v)), "std": float(np.std(v)), "values": [float(x) for x in v]}


def load_all(names, parser):
    """``{name: (X, y)}``; a missing data set ends the command in one line (status 1)."""
    data = {}
    for d in names:
        try:
            data[d] = load(d)
        except FileNotFoundError as exc:
            parser.exit(1, f"{parser.prog}: error: {NAMES[d]}: {exc} ('--quick' runs on the "
                           "copy of COIL-20 shipped with the package)\n")
    return data


def fit_nt(X, C, seed, kwargs, self_training=False):
    """Fit NTClustering; returns (model, record) with scores filled by the caller."""
    from ntnumba import NTClustering
    stamps = []
    graphs = []

    def cb(state):
        stamps.append(time.perf_counter())
        # the graph rule's partition of this iteration (n_shared, its cut for every candidate
        # r): an attribute of the callback's state that its documentation does not list
        graphs.append(getattr(state, "graph", None))
        if self_training:
            state.graph = None  # the next iteration re-partitions with the new A
        return False

    t0 = time.perf_counter()
    model = NTClustering(C, random_state=seed, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, callback=cb)
    t1 = time.perf_counter()
    # the first callback comes after initialisation + iteration 1; the graph partition of
    # init="graph" is part of the first interval
    iters = np.diff(stamps) if len(stamps) > 1 else np.array([])
    rec = {"seed": seed, "fit_s": t1 - t0, "n_iter": int(model.n_iter_),
           "first_iter_incl_init_s": (stamps[0] - t0) if stamps else None,
           "s_per_iter": float(np.median(iters)) if iters.size else
           ((stamps[0] - t0) if stamps else None)}
    if hasattr(model, "n_shared_"):
        rec["n_shared"] = int(model.n_shared_)
        rec["graph_cut"] = float(model.graph_cut_)
        g = (graphs[-1] if graphs else None) or {}
        if "ncut" in g:
            rec["ncut_by_r"] = {str(k): float(v) for k, v in g["ncut"].items()}
    return model, rec


def _a_properties(model):
    """kappa(A) of ``A`` on its subspace (its nonzero singular values: ``A`` is zero on the
    directions the model leaves out, e.g. the shared ones) and mu(A)."""
    from ntnumba.metrics import mutual_coherence
    A = np.asarray(model.components_, dtype=np.float64)
    s = np.linalg.svd(A, compute_uv=False)
    s = s[s > max(A.shape) * np.finfo(np.float64).eps * s[0]]
    return {"kappa": float(s[0] / s[-1]), "mu": float(mutual_coherence(A))}


# --------------------------------------------------------------------------- experiments
def run_default(X, y, C, seeds, defaults):
    runs = []
    for s in seeds:
        model, rec = fit_nt(X, C, s, dict(defaults))
        rec.update(scores(y, model.labels_))
        rec.update(_a_properties(model))
        runs.append(rec)
        log(f"  ntnumba default seed {s}: CA {rec['ca']:.1f} NMI {rec['nmi']:.1f} "
            f"({rec['fit_s']:.1f}s, r={rec.get('n_shared')})")
    out = {k: _stats([r[k] for r in runs])
           for k in ("ca", "nmi", "ari", "fit_s", "kappa", "mu")}
    sp = [r["s_per_iter"] for r in runs if r["s_per_iter"] is not None]
    out["s_per_iter"] = _stats(sp) if sp else None
    out["runs"] = runs
    return out


def run_peers(X, y, C, seeds):
    from sklearn.cluster import KMeans, SpectralClustering
    peers = {
        "KMeans(n_init=10)": lambda s: KMeans(C, n_init=10, random_state=s),
        "SpectralClustering(k-NN graph, n_neighbors=10)": lambda s: SpectralClustering(
            C, affinity="nearest_neighbors", n_neighbors=10, random_state=s),
        "SpectralClustering(k-NN graph, n_neighbors=5, cluster_qr)": lambda s: SpectralClustering(
            C, affinity="nearest_neighbors", n_neighbors=5, assign_labels="cluster_qr",
            random_state=s),
    }
    out = {}
    for name, make in peers.items():
        runs = []
        for s in seeds:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                labels = make(s).fit_predict(X)
            rec = {"seed": s, "fit_s": time.perf_counter() - t0}
            rec.update(scores(y, labels))
            runs.append(rec)
        out[name] = {k: _stats([r[k] for r in runs]) for k in ("ca", "nmi", "ari", "fit_s")}
        out[name]["runs"] = runs
        log(f"  {name}: CA {out[name]['ca']['mean']:.1f} NMI {out[name]['nmi']['mean']:.1f}")
    return out


def run_knn(X, y, C, defaults, seed=0):
    """1-NN accuracy (stratified 70/30 split, seed 0): raw pixels vs NT representations."""
    from sklearn.neighbors import KNeighborsClassifier
    from ntnumba.metrics import knn_split

    tr, te = knn_split(y, test_size=0.3, random_state=seed)

    def acc(Ztr, Zte, metric="euclidean"):
        clf = KNeighborsClassifier(n_neighbors=1, metric=metric).fit(Ztr, y[tr])
        return 100.0 * float(clf.score(Zte, y[te]))

    model, _ = fit_nt(X[tr], C, seed, dict(defaults))
    out = {"raw": acc(X[tr], X[te]), "raw_cosine": acc(X[tr], X[te], "cosine")}
    Ytr, Yte = model.transform(X[tr]), model.transform(X[te])
    out["nt_y"] = acc(Ytr, Yte)
    if hasattr(model, "shared_components_"):
        out["nt_code"] = acc(_graph_rows(model, X[tr]), _graph_rows(model, X[te]))
    pred = model.predict(X[te])
    out["train_ca"] = scores(y[tr], model.labels_)["ca"]
    out["heldout_predict_ca"] = scores(np.r_[y[tr], y[te]], np.r_[model.labels_, pred])["ca"]
    return out


def _graph_rows(model, X):
    """The rows the graph rule of a fitted model compares for the samples ``X`` (scaled as in
    the fit, its shared directions removed, its representation rules applied). No public
    equivalent: the estimator's private ``_scaled`` and ``_vote_space``."""
    from ntnumba.engine.passes import space_rows
    return space_rows(model._scaled(X, model.scale_), model._vote_space())


def run_rejection(X, y, C, defaults, seed=0):
    """Share of rejected samples (reject="auto") among held-out data and noise images."""
    from ntnumba.datasets import normalize_images
    from ntnumba.metrics import knn_split

    tr, te = knn_split(y, test_size=0.3, random_state=seed)
    model, _ = fit_nt(X[tr], C, seed, dict(defaults))
    rng = np.random.default_rng(seed)
    noise = normalize_images(rng.standard_normal((max(20, te.size // 5), X.shape[1])))
    pin = model.predict(X[te], reject="auto")
    pout = model.predict(noise, reject="auto")
    return {"threshold": float(model.reject_threshold_),
            "heldout_rejected_pct": 100.0 * float(np.mean(pin == -1)),
            "noise_rejected_pct": 100.0 * float(np.mean(pout == -1)),
            "n_heldout": int(te.size), "n_noise": int(noise.shape[0])}


def run_ablation(X, y, C, seeds, defaults, names, max_iter_alt):
    out = {}
    for name, kw, self_training, what in ABLATION:
        if name not in names:
            continue
        kw = dict(defaults, **kw)
        if "max_iter" in kw and kw["max_iter"] is None:
            kw["max_iter"] = max_iter_alt
        runs = []
        for s in seeds:
            model, rec = fit_nt(X, C, s, kw, self_training=self_training)
            rec.update(scores(y, model.labels_))
            rec["n_clusters_found"] = int(np.unique(model.labels_).size)
            runs.append(rec)
        res = {k: _stats([r[k] for r in runs]) for k in ("ca", "nmi", "fit_s")}
        res.update(runs=runs, what=what,
                   params={k: v for k, v in kw.items() if k not in defaults or
                           defaults[k] != v},
                   max_iter=kw.get("max_iter"))
        out[name] = res
        log(f"  ablation {name}: CA {res['ca']['mean']:.1f} NMI {res['nmi']['mean']:.1f} "
            f"({res['fit_s']['mean']:.1f}s/fit)")
    return out


# --------------------------------------------------------------------------- report
def _pm(st, digits=1):
    if st is None:
        return "-"
    return f"{st['mean']:.{digits}f} ± {st['std']:.{digits}f}"


def _paper(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def write_markdown(res, path, plots):
    L = []
    a = L.append
    meta = res["meta"]
    a("# Reproduction of Kostadinov et al. (2019) on COIL-20, ORL and Extended Yale B")
    a("")
    a(f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}; "
      f"{meta['total_minutes']:.1f} min). Every number below is in `results.json`. "
      "Data: the loaders of `benchmarks.datasets` at the paper's resolutions (area-averaged "
      "downscaling, each image normalised to zero mean and unit variance; see "
      "`docs/datasets.md`). All methods see the same arrays. CA = clustering accuracy "
      "(Hungarian matching), NMI = normalised mutual information, in %; mean ± std over "
      f"{meta['runs']} seeds ({', '.join(map(str, meta['seeds']))}).")
    a("")
    a("## Default configuration")
    a("")
    a("`NTClustering(n_clusters=C)` with everything else at its defaults: "
      + ", ".join(f"`{k}={v!r}`" for k, v in meta["defaults_effective"].items()) + ".")
    a("")
    a("## Clustering (the paper's Table 2, with peers)")
    a("")
    ds = [d for d in meta["datasets"]]
    head = "| method | " + " | ".join(f"{NAMES[d]} CA | NMI" for d in ds) + " |"
    a(head)
    a("|" + "---|" * (1 + 2 * len(ds)))
    row = ["**ntnumba (default)**"]
    for d in ds:
        r = res["datasets"][d]["default"]
        row += [f"**{_pm(r['ca'])}**", f"**{_pm(r['nmi'])}**"]
    a("| " + " | ".join(row) + " |")
    for peer in res["datasets"][ds[0]]["peers"]:
        row = [peer]
        for d in ds:
            r = res["datasets"][d]["peers"][peer]
            row += [_pm(r["ca"]), _pm(r["nmi"])]
        a("| " + " | ".join(row) + " |")
    if all(d in PAPER for d in ds):
        a("| paper (published) | " + " | ".join(
            f"{PAPER[d]['ca']:.1f} | {PAPER[d]['nmi']:.1f}" for d in ds) + " |")
        for peer, vals in PAPER_PEERS.items():
            a(f"| {peer} (published in the paper) | " + " | ".join(
                f"{_paper(vals[d][0])} | {_paper(vals[d][1])}" for d in ds) + " |")
    a("")
    paper_row = res.get("paper_literal")
    if paper_row:
        a("The paper's algorithm read literally (`assign=\"paper\", init=\"random\", "
          "scaling=None`) is in the ablation below.")
        a("")
    a("### Targets")
    a("")
    a("| data set | default − KMeans (CA / NMI) | default − Spectral k=10 | "
      "default − Spectral k=5 | default − paper |")
    a("|---|---|---|---|---|")
    for d in ds:
        r = res["datasets"][d]
        dm = r["default"]
        cells = [NAMES[d]]
        for peer in ("KMeans(n_init=10)", "SpectralClustering(k-NN graph, n_neighbors=10)",
                     "SpectralClustering(k-NN graph, n_neighbors=5, cluster_qr)"):
            p = r["peers"][peer]
            cells.append(f"{dm['ca']['mean'] - p['ca']['mean']:+.1f} / "
                         f"{dm['nmi']['mean'] - p['nmi']['mean']:+.1f}")
        if d in PAPER:
            cells.append(f"{dm['ca']['mean'] - PAPER[d]['ca']:+.1f} / "
                         f"{dm['nmi']['mean'] - PAPER[d]['nmi']:+.1f}")
        else:
            cells.append("-")
        a("| " + " | ".join(cells) + " |")
    a("")
    a("## Time and the linear map (the paper's Table 1)")
    a("")
    a("| data set | fit time, s | of which first iteration incl. graph initialisation, s | "
      "s / further iteration | iterations | kappa(A) on its subspace | mu(A) | r chosen | "
      "paper: kappa, mu, s/iter |")
    a("|---|---|---|---|---|---|---|---|---|")
    for d in ds:
        r = res["datasets"][d]["default"]
        first = [x["first_iter_incl_init_s"] for x in r["runs"]
                 if x["first_iter_incl_init_s"] is not None]
        later = [x["s_per_iter"] for x in r["runs"] if x["n_iter"] > 1]
        rs = sorted({x.get("n_shared") for x in r["runs"]}, key=str)
        pp = PAPER.get(d)
        a(f"| {NAMES[d]} | {_pm(r['fit_s'])} | "
          f"{np.mean(first):.1f} | {'%.2f' % np.mean(later) if later else '-'} | "
          f"{r['runs'][0]['n_iter']} | {_pm(r['kappa'])} | {r['mu']['mean']:.2e} | "
          f"{', '.join(map(str, rs))} | "
          + (f"{pp['kappa']:.0f}, {pp['mu']:.1e}, {pp['s_per_iter']:.0f}" if pp else "-")
          + " |")
    a("")
    a(f"Machine: {meta['machine']}, shared with other jobs while this ran (times are "
      "indicative; the first fit of a process includes numba's compilation, ~10-20 s). The "
      "default runs one iteration; its fit time is the graph partition (dense similarities, "
      "one k-NN graph and one eigen-decomposition per candidate r) plus one pass of Stages "
      "1-3.")
    abl0 = res["datasets"][ds[0]].get("ablation", {})
    key10 = "graph, 10 iterations (partition fixed)"
    if key10 in abl0 and "default" in abl0:
        cells = []
        for d in ds:
            ab = res["datasets"][d]["ablation"]
            extra = ab[key10]["fit_s"]["mean"] - ab["default"]["fit_s"]["mean"]
            cells.append(f"{NAMES[d]} {max(extra, 0.0) / 9:.2f} s")
        a("")
        a("Time per further iteration of the alternation (Stages 1-3 for the fixed partition, "
          "M = 2100), from the 10-iteration ablation variant: " + ", ".join(cells) + ". The "
          "objective rule's iterations (all C x Cs candidates) are in the ablation's fit times.")
    a("")
    if "knn" in res["datasets"][ds[0]]:
        a("## k-NN classification (the paper's Table 5)")
        a("")
        a("1-NN, Euclidean, stratified 70/30 split (seed 0); the NT model is fitted on the "
          "training part only and represents both parts (the paper's protocol; it does not "
          "state its split or k). `NT y` = `transform(X)`, the Stage-1 representation; "
          "`NT code` = the representation the graph is built on (shared directions removed, "
          "soft threshold).")
        a("")
        a("| data set | raw pixels | raw, cosine | NT y | NT code | paper NT / raw | "
          "train CA | CA with held-out part predicted |")
        a("|---|---|---|---|---|---|---|---|")
        for d in ds:
            k = res["datasets"][d]["knn"]
            pp = PAPER.get(d)
            a(f"| {NAMES[d]} | {k['raw']:.1f} | {k['raw_cosine']:.1f} | {k['nt_y']:.1f} | "
              f"{k.get('nt_code', float('nan')):.1f} | "
              + (f"{pp['knn_nt']:.1f} / {pp['knn_raw']:.1f}" if pp else "-")
              + f" | {k['train_ca']:.1f} | {k['heldout_predict_ca']:.1f} |")
        a("")
    a(table5_section(os.path.dirname(path)))  # ``--table5``'s section (its markers if none)
    a("")
    if "rejection" in res["datasets"][ds[0]]:
        a("## Rejection option")
        a("")
        a("`predict(X, reject=\"auto\")` on the held-out 30% and on Gaussian-noise images "
          "(normalised like the data), model fitted on the 70% training part.")
        a("")
        a("| data set | threshold | held-out samples rejected % | noise images rejected % |")
        a("|---|---|---|---|")
        for d in ds:
            r = res["datasets"][d]["rejection"]
            a(f"| {NAMES[d]} | {r['threshold']:.3g} | {r['heldout_rejected_pct']:.1f} "
              f"(of {r['n_heldout']}) | {r['noise_rejected_pct']:.1f} (of {r['n_noise']}) |")
        a("")
    if "ablation" in res["datasets"][ds[0]]:
        a("## Ablation")
        a("")
        a(f"Seeds: {', '.join(map(str, meta['ablation_seeds']))}; the alternating rules "
          f"(`objective`, `paper`) run {meta['ablation_iter']} iterations (the paper: 100), the "
          "graph variants the default's 1 unless stated. `r` = shared directions removed.")
        a("")
        a("| variant | tests | " + " | ".join(f"{NAMES[d]} CA | NMI" for d in ds) + " |")
        a("|---|---|" + "---|" * (2 * len(ds)))
        for name, _, _, what in ABLATION:
            if name not in res["datasets"][ds[0]]["ablation"]:
                continue
            row = [name, what]
            for d in ds:
                r = res["datasets"][d]["ablation"][name]
                row += [_pm(r["ca"]), _pm(r["nmi"])]
            a("| " + " | ".join(row) + " |")
        a("")
    for p in plots:
        a(f"![{p}]({p})")
        a("")
    notes = res.get("notes")
    if notes:
        a(notes)
    with open(path, "w") as fh:
        fh.write("\n".join(L) + "\n")


def table5_section(out):
    """The section of ``python -m benchmarks.table5`` from ``<out>/table5.json``, or its empty
    markers (filled by that command)."""
    from . import table5
    path = os.path.join(out, "table5.json")
    if not os.path.exists(path):
        return "\n".join(table5.MARK)
    with open(path) as fh:
        return table5.section(json.load(fh))


def make_plots(res, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # pragma: no cover - matplotlib is optional
        return []
    ds = res["meta"]["datasets"]
    files = []
    # 1. CA / NMI per method and data set
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    methods = ["ntnumba (default)"] + list(res["datasets"][ds[0]]["peers"]) + (
        ["paper (published)"] if all(d in PAPER for d in ds) else [])
    width = 0.8 / len(methods)
    for ax, key in zip(axes, ("ca", "nmi")):
        for j, m in enumerate(methods):
            vals, errs = [], []
            for d in ds:
                r = res["datasets"][d]
                if m == "paper (published)":
                    vals.append(PAPER[d][key])
                    errs.append(0.0)
                else:
                    st = (r["default"] if m == "ntnumba (default)" else r["peers"][m])[key]
                    vals.append(st["mean"])
                    errs.append(st["std"])
            ax.bar(np.arange(len(ds)) + j * width, vals, width, yerr=errs, label=m, capsize=2)
        ax.set_xticks(np.arange(len(ds)) + 0.4 - width / 2)
        ax.set_xticklabels([NAMES[d].split(" (")[0] for d in ds])
        ax.set_ylabel(key.upper() + " %")
        ax.set_ylim(0, 100)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    f = "results_clustering.png"
    fig.savefig(os.path.join(out, f), dpi=110)
    plt.close(fig)
    files.append(f)
    # 2. normalised cut per candidate r (the label-free choice of r)
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for d in ds:
        run = res["datasets"][d]["default"]["runs"][0]
        if "ncut_by_r" in run:
            rs = sorted(int(k) for k in run["ncut_by_r"])
            cut = np.array([run["ncut_by_r"][str(r)] for r in rs])
            ax.plot(rs, cut / cut.max(), "o-", label=NAMES[d].split(" (")[0])
    ax.set_xlabel("r (shared principal directions removed)")
    ax.set_ylabel("relaxed normalised cut / max")
    ax.legend(fontsize=8)
    fig.tight_layout()
    f = "results_ncut.png"
    fig.savefig(os.path.join(out, f), dpi=110)
    plt.close(fig)
    files.append(f)
    return files


# --------------------------------------------------------------------------- main
def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--table5" in argv:  # the learned transform's check: benchmarks/table5.py
        from . import table5
        return table5.main([a for a in argv if a != "--table5"])
    from .devsuite import suite_hook  # --suite dev: the development benchmark
    suite = suite_hook(argv)
    if suite is not None:
        return suite
    ap = argparse.ArgumentParser(prog="python -m benchmarks.reproduce", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke version: the shipped demo data, 1 run, 2 ablation variants")
    ap.add_argument("--datasets", default=None,
                    help="comma-separated subset of coil20,orl,yaleb (default: all; "
                         "--quick: demo)")
    ap.add_argument("--runs", type=int, default=None, help="seeds per method (default 5)")
    ap.add_argument("--ablation-runs", type=int, default=1, help="seeds per ablation variant")
    ap.add_argument("--ablation-iter", type=int, default=20,
                    help="iterations of the alternating rules in the ablation")
    ap.add_argument("--no-ablation", action="store_true")
    ap.add_argument("--no-knn", action="store_true")
    ap.add_argument("--out", default=OUT,
                    help=f"output folder of results.md, results.json and the plots, created "
                         f"if needed (default ./{OUT}; 'docs' replaces the committed results "
                         "page of a source checkout)")
    args = ap.parse_args(argv)

    from ntnumba import NTClustering, __version__

    t_start = time.perf_counter()
    if args.quick:
        datasets = (args.datasets or "demo").split(",")
        runs = args.runs or 1
        defaults = {"n_components": 300}
        abl_names = QUICK_ABLATION
        abl_iter = min(args.ablation_iter, 3)
    else:
        datasets = (args.datasets or "coil20,orl,yaleb").split(",")
        runs = args.runs or 5
        defaults = {}
        abl_names = [a[0] for a in ABLATION]
        abl_iter = args.ablation_iter
    for d in datasets:
        if d not in NAMES:
            ap.error(f"--datasets: unknown {d!r}; choose from coil20, orl, yaleb, demo")
    seeds = list(range(runs))
    abl_seeds = list(range(max(1, args.ablation_runs)))
    data = load_all(datasets, ap)
    os.makedirs(args.out, exist_ok=True)
    eff = NTClustering().get_params()
    eff.update(defaults)
    for k in ("n_clusters", "random_state", "n_jobs", "verbose", "warm_start"):
        eff.pop(k, None)
    res = {"meta": {
        "command": ("python -m benchmarks.reproduce "
                    + " ".join(sys.argv[1:] if argv is None else argv)).strip(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "ntnumba_version": __version__, "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "datasets": datasets, "runs": runs, "seeds": seeds, "ablation_seeds": abl_seeds,
        "ablation_iter": abl_iter, "quick": bool(args.quick),
        "defaults_effective": eff, "paper": PAPER, "paper_peers": PAPER_PEERS},
        "datasets": {}}
    for d in datasets:
        X, y = data[d]
        C = int(np.unique(y).size)
        r = {"n_samples": int(X.shape[0]), "n_features": int(X.shape[1]), "n_clusters": C}
        log(f"{NAMES[d]}: {X.shape[0]} x {X.shape[1]}, {C} classes; default x{runs}")
        r["default"] = run_default(X, y, C, seeds, defaults)
        r["peers"] = run_peers(X, y, C, seeds)
        if not args.no_knn:
            log(f"{NAMES[d]}: k-NN accuracy and rejection")
            r["knn"] = run_knn(X, y, C, defaults)
            r["rejection"] = run_rejection(X, y, C, defaults)
        if not args.no_ablation:
            r["ablation"] = run_ablation(X, y, C, abl_seeds, defaults, abl_names, abl_iter)
        res["datasets"][d] = r
        # write after every data set: a partial result survives an interruption
        res["meta"]["total_minutes"] = (time.perf_counter() - t_start) / 60.0
        with open(os.path.join(args.out, "results.json"), "w") as fh:
            json.dump(res, fh, indent=1, default=float)
    res["meta"]["total_minutes"] = (time.perf_counter() - t_start) / 60.0
    plots = make_plots(res, args.out)
    res["notes"] = NOTES if not args.quick else ""
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump(res, fh, indent=1, default=float)
    write_markdown(res, os.path.join(args.out, "results.md"), plots)
    log(f"wrote {os.path.join(args.out, 'results.md')} and results.json "
        f"({res['meta']['total_minutes']:.1f} min)")
    return res


#: How the default was found (exploration before this script; numbers from scratch runs at
#: the paper's resolutions, documented here so the provenance of the defaults is in the report).
NOTES = """## How the default was chosen (provenance)

Everything below was measured on the three data sets at the paper's resolutions, with one
configuration for all of them; labels were used only to score, never to pick a value per data
set. Exploration scripts ran before this reproduction (one to three seeds each); the live
ablation above re-measures the main points.

1. **The paper's rules.** Read literally (`assign="paper"`, random init, no scaling) every
   sample ends in one cluster within a few iterations (CA = 1/C). The `objective` rule (full
   per-sample cost) clusters, but below KMeans on all three sets (the previous default, 10
   iterations at M = 1024: COIL-20 58.5 / 72.0, ORL 63.5 / 81.1, Extended Yale B 5.8 / 5.5 vs
   KMeans 65.2 / 75.8, 64.5 / 83.0, 9.7 / 15.0). Started from good labels it drifts back to
   k-means quality: the tau/nu updates are centroid updates.
2. **NT similarity graph.** The paper's support-intersection similarity rho between the
   samples' NT representations, normalised, on a symmetric k-NN graph with spectral clustering
   (cluster_qr): COIL-20 84 / 94, ORL 83 / 92, Extended Yale B 44 / 53 (k = 5, random A,
   M = 2100). k = 3..7 are within ~3 points of k = 5 on COIL-20 and ORL; k = 10 and 15 lose
   (COIL-20 78-84 and 77, ORL 77-79 and 68-74, Yale B 28-30 and 22-24, vs 84, 81-82 and 42-44 at
   k = 5). On the spectral embedding (after step 3), k-means instead of cluster_qr gives
   Yale B 78-81 vs 94 (row-normalised k-means 91, discretisation 94), equal elsewhere. With
   lambda1 = 0.03 the threshold barely sparsifies (|Ax| ~ 1), so the normalised rho is close to
   a function of the angle between samples: the graph is close to a cosine k-NN graph (raw
   pixels, A = I, score within ~1.5 points), and a random overcomplete A adds nothing
   measurable. Sparser codes (keeping 50% or 20% of the coefficients per sample) changed CA by
   at most ~2 points (3 on ORL at 20% with r = 8).
3. **Shared component (the role of nu).** Extended Yale B's first three principal components
   carry 67% of its variance (illumination, shared by all subjects). Removing the r leading
   principal directions before the graph: Yale B 44 -> 90 (r = 4), 93 (r = 6-8), 94.5 (r = 12);
   COIL-20 flat (82-84 for r <= 8, 78-82 at r = 12); ORL 83 -> 79-76 (r = 4-8). No single r suits
   all three, so r is chosen per fit without labels: the relaxed C-way normalised cut of the
   k-NN graph (what spectral clustering minimises) is smallest at r = 16 on Yale B, r = 0 on ORL
   and is flat on COIL-20 (r in 0-8). Whitening instead of removal: Yale B 6-15 (worse).
4. **Learning A (the paper's Stages 2-3) with the graph's clusters.** Re-partitioning after
   every A update (self-training; M = 1024, three seeds, Stage 3 run to convergence every
   iteration): with lambda_a = 1, Yale B 94 -> 97 after 3-5 iterations, but one seed of three
   collapsed to 58-62 when the cut then preferred r = 0; COIL-20 84 -> 91 at iterations 1-2,
   then 76-83; ORL flat (84-86). With lambda_a = 0.5: Yale B 94 -> 97 at iterations 5-6 in all
   three seeds, COIL-20 and ORL within 1 point of iteration 0. Through the estimator (one MM
   step of Stage 3 per iteration, as the driver does) it did not reproduce: re-partitioning
   every iteration with lambda_a = 1 took COIL-20 83 -> 58, ORL 83 -> 73 and Yale B 95 -> 90
   over 8 iterations, and with lambda_a = 0.5 Yale B moved between 89 and 95 (one seed each).
   The cut cannot pick the iteration: it keeps falling on ORL and Yale B (also while Yale B
   collapses) and rises on COIL-20. Keeping the partition fixed and learning A for it changes
   only the representation: 1-NN accuracy of `transform` (70/30 split) COIL-20 99.8 (1
   iteration) -> 98.8 (10) -> 90.7 (100), ORL 96.7 -> 93.3 (10) -> 93.3 (100), Yale B 72 (1)
   -> 78 (10) -> 94 (30). Default: the partition of the initial NT representations and one
   iteration, the setting that was never worse; self-training stays available (a callback that
   sets `state.graph = None`, see the ablation).
5. **Out-of-sample rule.** Stage 1 (nearest tau + nu) on held-out samples loses much on
   Yale B (70 vs 92 on the training part); a similarity-weighted 5-NN vote on the same NT
   codes keeps it (91). `predict` uses the vote for `assign="graph"`.
6. **Rejection score.** Graph rule: 1 - mean NT similarity to the k most similar training
   codes. Gaussian-noise images scored 0.43-0.53 (COIL-20) and 0.59-0.64 (Yale B) against at
   most 0.39 and 0.52 for held-out images; the Stage-1 cost separated COIL-20 but not Yale B
   (noise 613-873, training faces up to 740). Threshold "auto": the largest leave-one-out
   score of a training sample. Objective and paper rules: the rule's own minimum score (cost,
   sP), threshold Tukey's far-out fence on log scores (noise ~10x the training costs on the
   shipped COIL-20 demo and on blobs, `tests/test_rejection.py`).
7. **Few features.** Removing directions makes any k-NN graph look more clustered, so on blobs
   of 3-6 features the cut chose r = N - 1 and the partition failed (ARI ~0, 3 blobs in 6
   dimensions). r is now capped at a quarter of the data's rank: ARI 1.0 on 3-4 blobs in 4-10
   dimensions (`tests/test_graph.py`); on 2-D blobs the angle-based similarity stays weaker
   than the objective rule (ARI 0.2-0.56 for both on 4 blobs).
8. **Leading principal directions.** With more than 16 features the partition of the samples
   on their 4 C leading principal directions replaces that of the samples when its relaxed
   normalised cut is lower by more than 2% (removing directions lowers any cut, hence the
   margin; `ntnumba/_select.py`, rule 4, chosen and checked on the development suite and its
   held-out check set, `docs/dev_results.md`, `docs/dev_check.md`). Here it is kept on
   COIL-20 (cut 0.0132 -> 0.0127 at r = 0; CA 85.2 -> 90.4, the dev suite's only change) and
   not on ORL (cut 0.4851 against 0.4859) or Extended Yale B (0.186 against 0.198).

Remaining gaps (see the targets table): Extended Yale B CA/NMI stay below the paper's numbers;
COIL-20 reaches the paper's CA since item 8 (a gain on this one development set, fragile:
`ntnumba/_select.py`). COIL-20's remaining errors are objects whose k-NN graphs join (cars,
boxes); its NMI is above the paper's. Yale B needs subspace-level modelling beyond removing a
shared subspace; self-training with learned A reached the paper's level in 2 of 3 seeds but is
not stable.
"""

if __name__ == "__main__":  # pragma: no cover
    main()

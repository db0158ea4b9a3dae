"""Issue 25: the default against UMAP pipelines and peers, and the rules that combine them.

The record is ``docs/research/embedding-partition.md``. Every method runs per (data set, seed)
and its result is cached as ``<out>/runs/<set>/<method>_s<seed>.json`` (UMAP embeddings in
``<out>/emb``, the default's fits in ``<out>/rm``): a rerun computes only what is missing.
ntnumba is imported from the checkout (run from the repository root); the script calls private
functions of the package (the default's graph rows and graph) to build the "lead" and the
selection criteria: benchmarks only, nothing of it is in the package.

Run (one process, niced, single-threaded)::

    export NTNUMBA_DATA=/path/to/shared/data NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 \\
        OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
    nice -n 15 python -m benchmarks.embedding_study run --set check --out emb25-check
    python -m benchmarks.embedding_study report --set check --out emb25-check

``--set study``: the 22 sets the rules were chosen on; ``--set check``: the held-out check set
of the development suite (``benchmarks.devsuite.CHECK``), not used to choose them. The default
methods are those R1 and R2 need (``RULE_METHODS``); ``--methods`` adds the study's variants
(``lead_euc``, ``lead_nn30``). Needs umap-learn and finch-clust (the extra ``bench``).

Methods: ``default`` (``NTClustering(C)``; above 2100 features ``learn_transform=False``, as
the study ran it); ``lead``: the default's feature weights, centring and shared directions
removed (its rows ``graph_rows``), then UMAP (cosine, 15 neighbours, ``min_dist=0``, 10
components) and ``KMeans(n_init=10)``; ``lead2``: the same but Euclidean UMAP on at most 16
features; peers ``kmeans``, ``spectral`` (k-NN, k=10),
``finch`` (cosine), ``umap_km`` (UMAP of the input rows -> KMeans), ``umap_hdb`` (HDBSCAN,
``min_cluster_size=max(5, n // (4 C))``, on that embedding; noise is an error in CA). ``crit``
and ``crit2`` record label-free criteria of the candidates' partitions: the discrete normalised
cut ``sum_c cut(c) / vol(c)`` on several graphs. Rules (``report``): R1 = at most 16 features
the default, else of ``default`` and ``lead2`` the partition of smaller cut on the default's
own k=5 mutual-rank graph of its rows; R2 = at most 16 features the default, else of
``default``, ``lead`` and ``kmeans`` the one of smaller cut on the Euclidean fuzzy 10-NN UMAP
graph of the default's rows.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

from .common import scores

# ------------------------------------------------------------------------------ data


def _img_norm(X):
    from ntnumba.datasets import normalize_images
    return normalize_images(np.asarray(X, dtype=np.float64))


def _mat(path):
    from .devsuite import _mat as devsuite_mat
    return devsuite_mat(path)


def _study_only(name):
    """The study's sets that the development suite does not hold."""
    if name == "coil20-32":
        m = _mat("coil20/COIL20_32x32.mat")
        return _img_norm(m["X"]), m["Y"].ravel()
    if name == "coil20-32f":
        m = _mat("coil20/COIL20_32x32_float.mat")
        return _img_norm(m["fea"]), m["gnd"].ravel()
    if name == "orl-32":
        m = _mat("orl/ORL_32x32.mat")
        return _img_norm(m["fea"]), m["gnd"].ravel()
    from sklearn.datasets import make_blobs
    if name == "blobs-50x20":
        return make_blobs(n_samples=[20] * 50, n_features=10, cluster_std=1.0,
                          center_box=(-10, 10), random_state=0)
    if name == "blobs-unbal":
        return make_blobs(n_samples=[500, 200, 80, 30, 15], n_features=8, cluster_std=1.5,
                          center_box=(-10, 10), random_state=1)
    if name == "blobs-aniso":
        X, y = make_blobs(n_samples=600, centers=3, random_state=170)
        return X @ np.array([[0.6, -0.6], [-0.4, 0.8]]), y
    raise KeyError(name)


#: the study's 22 sets: name -> the development suite's set of the same input (None: below)
STUDY = {"coil20-32": None, "coil20-32f": None, "coil20-20x25-area": "coil20",
         "coil20-20x25-bilin": "coil20-bilin", "orl-32": None, "yaleb-21-area": "yaleb",
         "yaleb-21-bilin": "yaleb-bilin", "mnist": "mnist", "usps": "usps", "isolet": "isolet",
         "relathe": "relathe", "prostate": "prostate", "nci9": "nci9", "pixraw10P": "pixraw10P",
         "madelon": "madelon", "digits": "digits", "iris": "iris-std", "wine": "wine-std",
         "breast_cancer": "bc-std", "blobs-50x20": None, "blobs-unbal": None,
         "blobs-aniso": None}


def set_names(which):
    from .devsuite import CHECK
    return list(STUDY) if which == "study" else list(CHECK)


def load(name):
    """``(X, y)``: ``X`` sparse (CSR) for a sparse set, else dense float64; labels 0..C-1."""
    from .devsuite import load_inputs
    if name in STUDY and STUDY[name] is None:
        X, y = _study_only(name)
        return np.asarray(X, dtype=np.float64), np.unique(y, return_inverse=True)[1]
    X, X_sparse, y = load_inputs(STUDY.get(name, name))
    return (X_sparse if X_sparse is not None else X), y


# ------------------------------------------------------------------------------ helpers
class Timer:
    def __enter__(self):
        self.c, self.w = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *a):
        self.cpu = time.process_time() - self.c
        self.wall = time.perf_counter() - self.w


def dense(X):
    return X.toarray() if sp.issparse(X) else X


class Study:
    """The cached computations of one output folder."""

    def __init__(self, out):
        self.out = out
        self.runs = os.path.join(out, "runs")
        self.emb = os.path.join(out, "emb")
        self.rm = os.path.join(out, "rm")

    def embed(self, ds, key, rows_fn, seed, metric="cosine", nn=15, nc=10):
        """UMAP embedding, cached on disk: (Z, cpu_s, wall_s)."""
        import umap
        os.makedirs(os.path.join(self.emb, ds), exist_ok=True)
        path = os.path.join(self.emb, ds, f"{key}_{metric}_nn{nn}_nc{nc}_s{seed}.npz")
        if os.path.exists(path):
            z = np.load(path)
            return z["Z"], float(z["cpu"]), float(z["wall"])
        rows = rows_fn()
        with Timer() as t, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Z = umap.UMAP(n_neighbors=min(nn, rows.shape[0] - 1), min_dist=0.0,
                          n_components=nc, metric=metric, random_state=seed).fit_transform(rows)
        np.savez(path, Z=Z, cpu=t.cpu, wall=t.wall)
        return Z, t.cpu, t.wall

    def removal(self, ds, X, C, seed):
        """The default's fit: labels, and its graph rows' (weights, mean, V) (cached)."""
        os.makedirs(self.rm, exist_ok=True)
        path = os.path.join(self.rm, f"{ds}_s{seed}.npz")
        if os.path.exists(path):
            z = np.load(path, allow_pickle=True)
            return {k: z[k] for k in z.files}
        from ntnumba import NTClustering
        from ntnumba.partition.select import graph_space

        Xd = dense(X)
        short = Xd.shape[1] > 2100
        with Timer() as t, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = NTClustering(C, random_state=seed, learn_transform=not short).fit(Xd)
        w, offset, applied = graph_space(Xd * m.scale_, "auto")
        out = dict(labels=m.labels_, scale=m.scale_, w=np.zeros(0) if w is None else w,
                   mean=m.shared_mean_, V=m.shared_components_, r=m.n_shared_, short=short,
                   offset=np.nan if offset is None else offset, applied=np.array(applied),
                   cpu=t.cpu, wall=t.wall)
        np.savez(path, **out)
        return out

    def labels(self, ds, method, seed):
        with open(os.path.join(self.runs, ds, f"{method}_s{seed}.json")) as fh:
            return np.asarray(json.load(fh)["labels"])


def removed_rows(X, R, with_offset=False):
    from ntnumba.partition.graph import graph_rows
    Xs = dense(X) * float(R["scale"])
    w = R["w"] if R["w"].size else None
    off = float(R["offset"]) if with_offset and np.isfinite(R["offset"]) else None
    return graph_rows(Xs, R["mean"], R["V"], off, w)


def km(Z, C, seed):
    from sklearn.cluster import KMeans
    return KMeans(C, n_init=10, random_state=seed).fit_predict(Z)


# ------------------------------------------------------------------------------ methods
def m_kmeans(S, ds, X, C, seed):
    with Timer() as t:
        lab = km(X, C, seed)
    return lab, t.cpu, t.wall, {}


def m_spectral(S, ds, X, C, seed):
    from sklearn.cluster import SpectralClustering
    with Timer() as t, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lab = SpectralClustering(C, affinity="nearest_neighbors", n_neighbors=10,
                                 random_state=seed).fit_predict(X)
    return lab, t.cpu, t.wall, {}


def m_finch(S, ds, X, C, seed):
    from finch import FINCH
    Xd = np.ascontiguousarray(dense(X), dtype=np.float32)
    with Timer() as t, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c, num, req = FINCH(Xd, req_clust=C, distance="cosine", verbose=False,
                            random_state=seed)
    return np.asarray(req).ravel(), t.cpu, t.wall, {"partitions": [int(v) for v in num]}


def m_default(S, ds, X, C, seed):
    R = S.removal(ds, X, C, seed)
    return R["labels"], float(R["cpu"]), float(R["wall"]), \
        {"r": int(R["r"]), "applied": [str(a) for a in R["applied"]],
         "partition_only": bool(R["short"])}


def m_umap_km(S, ds, X, C, seed):
    Z, c, w = S.embed(ds, "raw", lambda: X, seed)
    with Timer() as t:
        lab = km(Z, C, seed)
    return lab, c + t.cpu, w + t.wall, {}


def m_umap_hdb(S, ds, X, C, seed):
    from sklearn.cluster import HDBSCAN
    Z, c, w = S.embed(ds, "raw", lambda: X, seed)
    mcs = max(5, X.shape[0] // (4 * C))
    with Timer() as t:
        lab = HDBSCAN(min_cluster_size=mcs).fit_predict(Z)
    return lab, c + t.cpu, w + t.wall, {"mcs": mcs, "n_found": int(lab.max() + 1),
                                        "noise": int((lab < 0).sum())}


def lead_embedding(S, ds, X, C, seed, **kw):
    R = S.removal(ds, X, C, seed)
    Z, c, w = S.embed(ds, "rm", lambda: removed_rows(X, R), seed, **kw)
    return Z, c + float(R["cpu"]), w + float(R["wall"]), {"r": int(R["r"])}


def _lead_with(cluster, **kw):
    def method(S, ds, X, C, seed):
        Z, c, w, ex = lead_embedding(S, ds, X, C, seed, **kw)
        with Timer() as t:
            lab = cluster(Z, C, seed)
        return lab, c + t.cpu, w + t.wall, ex
    return method


def _ward(Z, C, seed):
    from sklearn.cluster import AgglomerativeClustering
    return AgglomerativeClustering(C, linkage="ward").fit_predict(Z)


m_lead = _lead_with(km)
m_lead_ward = _lead_with(_ward)
m_lead_nn30 = _lead_with(km, nn=30)
m_lead_euc = _lead_with(km, metric="euclidean")  # Euclidean UMAP of the default's rows


def m_lead2(S, ds, X, C, seed):
    """lead, but where the library's few-features rule applies (at most 16 features) UMAP
    compares the weighted rows by Euclidean distance instead of the angle of the centred rows."""
    from ntnumba.partition.select import FEW_FEATURES
    return (m_lead if X.shape[1] > FEW_FEATURES else m_lead_euc)(S, ds, X, C, seed)


def ncut(W, lab):
    """Discrete normalised cut sum_c cut(c)/vol(c) of the labels on the graph W (CSR)."""
    lab = np.asarray(lab)
    u, inv = np.unique(lab, return_inverse=True)
    H = sp.csr_matrix((np.ones(len(lab)), (np.arange(len(lab)), inv)), shape=(len(lab), len(u)))
    deg = np.asarray(W.sum(axis=1)).ravel()
    vol = H.T @ deg
    within = np.asarray((H.T @ (W @ H)).diagonal()).ravel()
    return float(np.sum((vol - within) / np.where(vol > 0, vol, 1.0)))


def fuzzy_graph(rows, nn, metric, seed):
    from umap.umap_ import fuzzy_simplicial_set
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G = fuzzy_simplicial_set(rows, min(nn, rows.shape[0] - 1), seed, metric)[0]
    return sp.csr_matrix(G)


def default_graph(rows, seed, k=5):
    """The default's own k-NN graph (mutual-rank weights, k = 5) of the removed rows."""
    from ntnumba.partition.graph import neighbour_lists, weighted_graph
    nn, sim, copies = neighbour_lists(rows, k, None, "mutual-rank", "auto", seed)
    return sp.csr_matrix(weighted_graph(nn, sim, k * copies, rows.shape[0], "mutual-rank"))


#: the candidates whose partitions ``crit`` / ``crit2`` score (a missing one is left out)
CRIT_CANDS = ["default", "lead", "umap_km", "kmeans", "lead_ward"]
CRIT2_CANDS = ["default", "lead2", "kmeans", "umap_km"]


def _criteria(S, ds, X, C, seed, cands, graphs, silhouette):
    """The cuts of the candidates' partitions on the graphs ``graphs(rows, X, seed)`` (a dict
    name -> CSR) of the default's rows; ``silhouette``: also their cosine silhouette there."""
    from sklearn.metrics import silhouette_score
    labs = {c: S.labels(ds, c, seed) for c in cands
            if os.path.exists(os.path.join(S.runs, ds, f"{c}_s{seed}.json"))}
    rows = removed_rows(X, S.removal(ds, X, C, seed))
    out = {}
    with Timer() as t:
        G = graphs(rows, X, seed)
        for c, lab in labs.items():
            d = {g: ncut(W, lab) for g, W in G.items()}
            k = len(np.unique(lab))
            if silhouette:
                d["sil_rm"] = (float(silhouette_score(rows, lab, metric="cosine"))
                               if 1 < k < len(lab) else -1.0)
                d["nclust"] = int(k)
            d["minsize"] = int(np.bincount(lab - lab.min()).min())
            out[c] = d
    return None, t.cpu, t.wall, {"crit": out}


def m_crit(S, ds, X, C, seed):
    """Label-free criteria of the candidates' partitions (no labels of its own)."""
    return _criteria(S, ds, X, C, seed, CRIT_CANDS, lambda rows, X, seed: {
        "g_rm15": fuzzy_graph(rows, 15, "cosine", seed),
        "g_x15": fuzzy_graph(dense(X), 15, "cosine", seed),
        "g_rm10e": fuzzy_graph(rows, 10, "euclidean", seed)}, True)


def m_crit2(S, ds, X, C, seed):
    """The cuts on the default's own graph and on Euclidean fuzzy 10- and 30-NN graphs."""
    return _criteria(S, ds, X, C, seed, CRIT2_CANDS, lambda rows, X, seed: {
        "g_def5": default_graph(rows, seed),
        "g_rm10e": fuzzy_graph(rows, 10, "euclidean", seed),
        "g_rm30e": fuzzy_graph(rows, 30, "euclidean", seed)}, False)


METHODS = {"kmeans": m_kmeans, "spectral": m_spectral, "finch": m_finch,
           "default": m_default, "umap_km": m_umap_km, "umap_hdb": m_umap_hdb,
           "lead": m_lead, "lead_ward": m_lead_ward, "lead_nn30": m_lead_nn30,
           "lead_euc": m_lead_euc, "crit": m_crit, "lead2": m_lead2, "crit2": m_crit2}
PEERS = ["kmeans", "spectral", "finch", "umap_km", "umap_hdb"]
#: what R1, R2 and the tables need, in order (the criteria after the candidates they score)
RULE_METHODS = ["kmeans", "default", "lead", "lead2", "umap_km", "umap_hdb", "spectral",
                "finch", "lead_ward", "crit", "crit2"]


def run(args):
    S = Study(args.out)
    names = args.datasets or set_names(args.set)
    cache = {}
    for seed in args.seeds:
        for ds in names:
            for meth in args.methods:
                path = os.path.join(S.runs, ds, f"{meth}_s{seed}.json")
                if os.path.exists(path):
                    continue
                if ds not in cache:
                    cache.clear()
                    cache[ds] = load(ds)
                X, y = cache[ds]
                C = int(y.max() + 1)
                try:
                    lab, cpu, wall, ex = METHODS[meth](S, ds, X, C, seed)
                    rec = dict(ds=ds, method=meth, seed=seed, cpu_s=cpu, wall_s=wall,
                               n=int(X.shape[0]), d=int(X.shape[1]), C=C, **ex)
                    if lab is not None:
                        lab = np.asarray(lab, dtype=np.int64)
                        sc = scores(y, lab)
                        rec["ca"], rec["nmi"] = sc["ca"], sc["nmi"]
                        rec["labels"] = lab.tolist()
                except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                    rec = dict(ds=ds, method=meth, seed=seed, error=repr(exc))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    json.dump(rec, f)
                print(f"{time.strftime('%H:%M:%S')} {ds:20s} {meth:10s} s{seed} "
                      + (f"CA {rec['ca']:5.1f} NMI {rec['nmi']:5.1f} cpu {rec['cpu_s']:6.1f}s"
                         if "ca" in rec else rec.get("error", "criteria")), flush=True)


# ------------------------------------------------------------------------------ report
#: label-free selection rules: name -> (criterion, candidates); the smallest criterion wins
#: (silhouette: the largest). Ties: the first candidate.
SELECT = {
    "sel_rm15[def,lead]": ("g_rm15", ["default", "lead"]),
    "sel_rm15[def,lead,km]": ("g_rm15", ["default", "lead", "kmeans"]),
    "sel_x15[def,lead]": ("g_x15", ["default", "lead"]),
    "sel_rm10e[def,lead]": ("g_rm10e", ["default", "lead"]),
    "sel_rm10e[def,lead,km]": ("g_rm10e", ["default", "lead", "kmeans"]),
    "sel_sil[def,lead]": ("sil_rm", ["default", "lead"]),
    "sel_rm10e[def,km]": ("g_rm10e", ["default", "kmeans"]),
    "sel_rm15[def,km]": ("g_rm15", ["default", "kmeans"]),
    "sel_x15[def,lead,km]": ("g_x15", ["default", "lead", "kmeans"]),
    "sel_sil[def,lead,km]": ("sil_rm", ["default", "lead", "kmeans"]),
}
SELECT2 = {
    "sel_def5[def,lead2]": ("g_def5", ["default", "lead2"]),
    "sel_def5[def,lead2,km]": ("g_def5", ["default", "lead2", "kmeans"]),
    "sel_rm10e[def,lead2]": ("g_rm10e", ["default", "lead2"]),
    "sel_rm10e[def,lead2,km]": ("g_rm10e", ["default", "lead2", "kmeans"]),
    "sel_rm30e[def,lead2]": ("g_rm30e", ["default", "lead2"]),
    "sel_rm30e[def,lead2,km]": ("g_rm30e", ["default", "lead2", "kmeans"]),
}
#: routes by the library's few-features rule: (at most 16 features, more)
ROUTES = [("default", "lead"), ("default", "sel_rm10e[def,lead]"),
          ("default", "sel_x15[def,lead]"), ("default", "sel_rm10e[def,lead,km]"),
          ("lead2", "sel_rm10e[def,lead]"), ("sel_rm10e[def,km]", "sel_rm10e[def,lead,km]"),
          ("sel_rm15[def,km]", "sel_rm10e[def,lead,km]"), ("default", "sel_x15[def,lead,km]"),
          ("default", "sel_rm15[def,lead,km]"), ("default", "sel_def5[def,lead2]"),
          ("default", "sel_def5[def,lead2,km]")]
ALIASES = {"R1": "route[default|sel_def5[def,lead2]]",
           "R2": "route[default|sel_rm10e[def,lead,km]]"}


def collect(out):
    res = {}
    runs = os.path.join(out, "runs")
    for ds in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        for f in sorted(os.listdir(os.path.join(runs, ds))):
            with open(os.path.join(runs, ds, f)) as fh:
                r = json.load(fh)
            if "ca" in r or "crit" in r:
                res.setdefault(r["ds"], {}).setdefault(r["method"], {})[r["seed"]] = r
    _add(res, "crit", SELECT)
    _add(res, "crit2", SELECT2)
    for few, many in ROUTES:
        name = f"route[{few}|{many}]"
        for ds, M in res.items():
            for seed in set(M.get(few, {})) & set(M.get(many, {})):
                r0 = M[few][seed]
                M.setdefault(name, {})[seed] = dict(M[few if r0["d"] <= 16 else many][seed],
                                                    method=name)
    for alias, name in ALIASES.items():
        for M in res.values():
            if name in M:
                M[alias] = M[name]
    return res


def _add(res, critname, select):
    for ds, M in res.items():
        for seed, cr in M.get(critname, {}).items():
            crit = cr["crit"]
            for name, (key, cands) in select.items():
                if any(seed not in M.get(c, {}) or c not in crit for c in cands):
                    continue
                sign = -1.0 if key.startswith("sil") else 1.0
                best = min(cands, key=lambda c: sign * crit[c][key])
                cpu = sum(M[c][seed]["cpu_s"] for c in cands) + cr["cpu_s"]
                wall = sum(M[c][seed]["wall_s"] for c in cands) + cr["wall_s"]
                if "default" in cands and any(c.startswith("lead") for c in cands):
                    cpu -= M["default"][seed]["cpu_s"]  # the lead's time includes the default's
                    wall -= M["default"][seed]["wall_s"]
                r = dict(M[best][seed])
                r.update(method=name, cpu_s=cpu, wall_s=wall, chosen=best)
                M.setdefault(name, {})[seed] = r


def stats(runs, seeds=None):
    rs = [runs[s] for s in sorted(runs) if seeds is None or s in seeds]
    if not rs:
        return None
    return dict(ca=np.mean([r["ca"] for r in rs]), nmi=np.mean([r["nmi"] for r in rs]),
                cpu=np.mean([r["cpu_s"] for r in rs]), wall=np.mean([r["wall_s"] for r in rs]),
                k=len(rs))


def table(res, names, cands, seeds=None, slack=1.0):
    """Markdown: CA/NMI per set (``↓`` below KMeans-1 on CA or NMI, ``*`` at or above the best
    peer-1 on both, the per-metric maximum over ``PEERS``), then the counts."""
    lines = ["| set | n x d, C | " + " | ".join(cands) + " | KMeans | best peer (CA) |",
             "|" + "---|" * (len(cands) + 4)]
    counts = {c: [0, 0, 0] for c in cands}
    ratios = {c: [] for c in cands}
    for ds in names:
        if ds not in res:
            continue
        M = {m: stats(v, seeds) for m, v in res[ds].items() if not m.startswith("crit")}
        M = {m: v for m, v in M.items() if v}
        if "kmeans" not in M:
            continue
        r0 = next(iter(res[ds]["kmeans"].values()))
        peers = {p: M[p] for p in PEERS if p in M}
        bp = max(peers, key=lambda p: peers[p]["ca"])
        bca = max(v["ca"] for v in peers.values())
        bnmi = max(v["nmi"] for v in peers.values())
        ks = {M[m]["k"] for m in list(cands) + PEERS if m in M}
        row = f"| {ds}{'' if ks == {5} else ' (seeds ' + '/'.join(map(str, sorted(ks))) + ')'} " \
              f"| {r0['n']}x{r0['d']}, {r0['C']} |"
        for c in cands:
            if c not in M:
                row += " - |"
                continue
            v = M[c]
            okk = v["ca"] >= M["kmeans"]["ca"] - slack and v["nmi"] >= M["kmeans"]["nmi"] - slack
            okp = v["ca"] >= bca - slack and v["nmi"] >= bnmi - slack
            counts[c][0] += okk
            counts[c][1] += okp
            counts[c][2] += 1
            row += f" {v['ca']:.1f}/{v['nmi']:.1f}{'' if okk else '↓'}{'*' if okp else ''} |"
            if "umap_km" in M:
                ratios[c].append(v["cpu"] / M["umap_km"]["cpu"])
        k = M["kmeans"]
        b = peers[bp]
        row += f" {k['ca']:.1f}/{k['nmi']:.1f} | {b['ca']:.1f}/{b['nmi']:.1f} {bp} |"
        lines.append(row)
    lines += ["", "| candidate | sets >= KMeans-1 (CA and NMI) | sets >= best peer-1 (CA and NMI, "
              "per-metric max over peers) | median / max cpu ratio vs UMAP->KMeans |",
              "|---|---|---|---|"]
    for c in cands:
        a, b, n = counts[c]
        rr = np.array(ratios[c]) if ratios[c] else np.array([np.nan])
        lines.append(f"| {c} | {a}/{n} | {b}/{n} | {np.median(rr):.2f} / {np.max(rr):.2f} |")
    return "\n".join(lines)


def chosen(res, names, rule):
    """How often the rule kept each candidate: ``{candidate: count}`` over sets and seeds."""
    out = {}
    for ds in names:
        for r in res.get(ds, {}).get(ALIASES.get(rule, rule), {}).values():
            c = r.get("chosen", "default (<= 16 features)")
            out[c] = out.get(c, 0) + 1
    return out


def report(args):
    res = collect(args.out)
    names = args.datasets or set_names(args.set)
    cands = args.cands.split(";")
    text = table(res, names, cands, args.report_seeds)
    text += "\n\n" + "\n".join(
        f"{rule} chose: {chosen(res, names, rule)}" for rule in ("R1", "R2"))
    print(text)
    with open(os.path.join(args.out, f"table_{args.set}.md"), "w") as fh:
        fh.write(text + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.embedding_study",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["run", "report"])
    ap.add_argument("--set", default="check", choices=["study", "check"])
    ap.add_argument("--out", default=os.path.join("reproduce-results", "embedding_study"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--datasets", nargs="+", default=None)
    ap.add_argument("--methods", nargs="+", default=RULE_METHODS, choices=list(METHODS))
    ap.add_argument("--cands", default="default;lead;R1;R2",
                    help="report: the candidates' columns, ';'-separated")
    ap.add_argument("--report-seeds", type=int, nargs="+", default=None)
    args = ap.parse_args(argv)
    (run if args.cmd == "run" else report)(args)


if __name__ == "__main__":
    sys.exit(main())

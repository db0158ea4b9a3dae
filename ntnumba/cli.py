"""The ``ntnumba`` command: ``demo``, ``fit``, ``predict`` and ``evaluate``.

Built on :mod:`argparse` (standard library: one dependency less), a thin layer over the library,
testable by calling :func:`main` with a list of arguments.

Conventions: results go to standard output, progress (one line per iteration: objective,
relative change, elapsed time, ETA; bars on a terminal) and status messages to standard error.
Progress is on by default here (``-q`` turns it off; the library is quiet by default). A bad
argument or an unreadable file gives one line ``ntnumba <command>: error: ...`` and exit status
1 (2 for usage errors found by argparse, also one line); ``--traceback`` shows the Python
traceback instead.
Ctrl-C during ``fit`` stops after writing the last completed iteration (exit status 130).

BLAS threads: the commands run NumPy's BLAS on one thread by default (``--blas-threads``): the
numba kernels already use every core (user guide, "Speed").

Examples
--------
>>> from ntnumba.cli import main
>>> main(["--version"])  # doctest: +ELLIPSIS
ntnumba ...
0
"""
import argparse
import csv
import json
import os
import sys
import time
import math
import warnings

__all__ = ["main", "build_parser"]

#: Settings of ``ntnumba demo``: COIL-20 as shipped (32x32) and the library's default model
#: (only ``n_clusters`` and the seed are set); with first-call compilation it takes well under a
#: minute on two cores.
DEMO = dict(resolution="32x32", seed=0, n_per_cluster=10)

_LABEL_EXT = (".csv", ".npy")
_COMMANDS = ("demo", "fit", "predict", "evaluate")
#: First lines of a labels file read as its header even when the labels are strings.
_LABEL_HEADERS = ("label", "labels", "target", "class", "y", "species", "cluster", "truth")


class CLIError(Exception):
    """An error reported to the user as one line (no traceback)."""


class _Version(argparse.Action):
    """``--version``, reading the installed version only when asked (it takes a while)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from . import __version__
        print(f"ntnumba {__version__}")
        parser.exit(0)


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line that points to ``--help``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _status(msg, quiet=False):
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def _shape(text):
    """'HxW' -> (H, W)."""
    try:
        h, w = (int(p) for p in text.lower().split("x"))
        if h < 1 or w < 1:
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HxW with positive integers (e.g. 32x32), "
                                         f"got {text!r}") from None
    return (h, w)


def _int_at_least(lo):
    """An argparse type: an integer >= ``lo``."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {v}")
        return v
    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


def _components(text):
    """--n-components: a positive integer or 'auto'."""
    return text if text == "auto" else _positive_int(text)


def _n_shared(text):
    """'auto', an int, or comma-separated ints (the candidates tried)."""
    if text == "auto":
        return text
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto', an integer or integers separated "
                                         f"by commas, got {text!r}") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return values[0] if len(values) == 1 else values


def _reject(text):
    if text == "auto":
        return text
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number, got {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return v


def _nonneg_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return v


# ------------------------------------------------------------------------------ files
def _check_output(path, what, exts=None, in_place=True):
    """Fail before any long computation if ``path`` cannot be written: a file is created and
    removed in its folder (``os.access`` says yes to root and on /proc); with ``in_place``, an
    existing file must open for writing."""
    path = os.fspath(path)
    if exts is not None and os.path.splitext(path)[1].lower() not in exts:
        raise CLIError(f"{what}: {path}: unsupported extension; use one of {', '.join(exts)}")
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        raise CLIError(f"{what}: {path}: folder {folder} does not exist")
    if os.path.isdir(real):
        raise CLIError(f"{what}: {path} is a directory")
    fix = "choose another output path"
    probe = os.path.join(folder, f".ntnumba-write-test.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.remove(probe)
    except OSError as exc:
        raise CLIError(f"{what}: {path}: cannot write in folder {folder} "
                       f"({exc.strerror or exc}); {fix}") from None
    if in_place and os.path.isfile(real):
        try:
            os.close(os.open(real, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NONBLOCK", 0)))
        except OSError as exc:
            raise CLIError(f"{what}: {path}: the file cannot be written ({exc.strerror or exc})"
                           f"; {fix}") from None
    return path


def _load_data(args, quiet=False):
    """Read DATA with the data options and say on standard error what was read."""
    from .datasets import load_file, normalize_images
    if not os.path.exists(args.data):
        raise CLIError(f"data file not found: {args.data}")
    X, y, info = load_file(args.data, image_shape=args.image_shape, order=args.order,
                           resize=args.resize, data_key=args.data_key,
                           target_key=_column_key(args.target_key),
                           delimiter=args.delimiter, header=args.header,
                           index_col=_column_key(args.index_col), return_info=True)
    _status(f"read {args.data}: {info['description']}", quiet)
    if args.normalize and hasattr(X, "toarray"):   # a scipy.sparse matrix
        raise CLIError(f"--normalize centres every row: {args.data} holds a sparse matrix; "
                       "drop --normalize (e.g. TF-IDF rows are normalised already)")
    if args.normalize:
        X = normalize_images(X)
    return X, y


def _column_key(key):
    """A --target-key/--index-col value: None, False ('none'), an int position or a name."""
    if key is None:
        return None
    if key.lower() == "none":
        return False
    try:
        return int(key)
    except ValueError:
        return key


def _header(text):
    choices = {"auto": "auto", "yes": True, "no": False}
    if text.lower() not in choices:
        raise argparse.ArgumentTypeError(f"expected auto, yes or no, got {text!r}")
    return choices[text.lower()]


def _n_jobs(text):
    """numba threads: a positive integer, or -1 (all cores), -2 (all but one), ..."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v == 0:
        raise argparse.ArgumentTypeError("must be a positive number of threads or -1 (all "
                                         "cores), got 0")
    return v


def write_labels(path, labels):
    """Write cluster labels as ``.npy`` (int64) or ``.csv`` (a header ``label``, one per line)."""
    import numpy as np
    labels = np.asarray(labels).ravel()
    if path.lower().endswith(".npy"):
        np.save(path, labels.astype(np.int64))
        return
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label"])
        w.writerows([[int(v)] for v in labels])


def _as_labels(values):
    """Strings -> int64 when they are all integers, else kept as strings."""
    import numpy as np
    values = [v.strip() for v in values]
    try:
        return np.array([int(v) for v in values], dtype=np.int64)
    except ValueError:
        pass
    try:
        f = np.array([float(v) for v in values])
        if np.all(np.isfinite(f)) and np.all(f == np.round(f)):
            return f.astype(np.int64)
        return f
    except ValueError:
        return np.array(values)


def read_labels(path, key=None):
    """Labels from a labels file or from the labels of a data file.

    ``.npy``: a vector (or one column). ``.csv``/``.txt``: one value per line (an optional
    header line), or the labels column of a data table (``key``: a column name, a position or
    ``"last"``; default: the column named ``target``, ``label``, ...). ``.mat``/``.npz``: the
    array ``key``, or the labels :func:`ntnumba.datasets.load_file` finds (``Y``, ``gnd``,
    ``labels``, ``y``, ``target``).
    """
    import numpy as np
    from .datasets import load_file
    if not os.path.exists(path):
        raise CLIError(f"labels file not found: {path}")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        if key is not None:
            raise CLIError(f"{path}: --key is not used for .npy files (they hold one array)")
        try:
            a = np.load(path, allow_pickle=False)
        except ValueError as exc:
            raise CLIError(f"{path}: not a readable .npy file ({exc})") from None
        if a.ndim == 2 and 1 in a.shape:
            a = a.ravel()
        if a.ndim != 1:
            raise CLIError(f"{path}: expected a vector of labels, got an array of shape "
                           f"{a.shape}")
        return a
    if ext in (".csv", ".txt", ".tsv") and key is None:
        from .datasets import csv_sample, sniff_delimiter
        lines = csv_sample(path)
        if not lines:
            raise CLIError(f"{path}: no labels in the file")
        # a table when a delimiter splits the lines (not spaces: labels may contain them)
        if sniff_delimiter(lines) not in (",", "whitespace") or any("," in ln for ln in lines):
            _, y = load_file(path, target_key=None)     # a data table with a labels column
            if y is None:
                raise CLIError(f"{path}: expected one label per line, or a table with a "
                               "labels column (name it with --key NAME, a position, or last)")
            return y
        values = [line.strip() for line in csv_sample(path, limit=None)]  # every label
        lab = _as_labels(values[1:])
        if (lab.dtype.kind in "if" and _as_labels(values[:1]).dtype.kind not in "if") or \
                values[0].lower() in _LABEL_HEADERS:
            return lab                                    # a header line
        return _as_labels(values)
    if ext not in (".mat", ".npz", ".csv", ".txt", ".tsv"):
        raise CLIError(f"{path}: unsupported labels file; use .csv, .txt, .npy, or a "
                       ".mat/.npz/.csv data file with its labels")
    _, y = load_file(path, data_key=None, target_key=_column_key(key))
    if y is None:
        raise CLIError(f"{path}: no labels found (looked for Y, gnd, labels, y, target); "
                       "name them with --key")
    return y


def _scores_line(scores):
    return "  ".join(f"{k.upper()} {v:.3f}" for k, v in scores.items())


# ------------------------------------------------------------------------------ commands
def _model_from_args(args, verbose):
    from .estimators.clustering import NTClustering
    return NTClustering(
        args.n_clusters, n_components=args.n_components, n_similarity=args.n_similarity,
        lambda0=args.lambda0, lambda1=args.lambda1, lambda_e=args.lambda_e,
        lambda_a=args.lambda_a, lambda2=args.lambda2, lambda3=args.lambda3,
        lambda4=args.lambda4, learn_transform=not args.no_transform, assign=args.assign,
        init=args.init, n_neighbors=args.n_neighbors, n_shared=args.n_shared,
        max_iter=args.max_iter, tol=args.tol, n_init=args.n_init,
        scaling=args.scaling, random_state=args.seed,
        n_jobs=args.n_jobs, verbose=verbose)


def _fit_keeping_interrupt(model, X):
    """Fit; on Ctrl-C return True (the model keeps the last completed iteration)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="fit interrupted", category=RuntimeWarning)
        try:
            model.fit(X)
        except KeyboardInterrupt:
            return True
    return False


def cmd_fit(args):
    import numpy as np
    from .metrics import evaluate
    out = _check_output(args.out if args.out.endswith(".npz") else args.out + ".npz", "--out",
                        in_place=False)    # save renames a new file over it
    labels_path = args.labels or (out[:-len(".npz")] + ".labels.csv")
    _check_output(labels_path, "--labels", _LABEL_EXT)
    if args.plot_objective:
        _check_output(args.plot_objective, "--plot-objective")
    X, y = _load_data(args, args.quiet)
    model = _model_from_args(args, verbose=0 if args.quiet else 1)
    t0 = time.perf_counter()
    interrupted = _fit_keeping_interrupt(model, X)
    elapsed = time.perf_counter() - t0
    if interrupted and getattr(model, "n_iter_", 0) == 0:
        _status("interrupted before the fit kept a completed iteration: nothing written")
        return 130
    model.save(out)
    write_labels(labels_path, model.labels_)
    h = model.objective_history_
    head = "interrupted: kept" if interrupted else "fitted"
    print(f"{head} {model.n_iter_} iteration(s) in {elapsed:.1f} s, objective {h[-1]:.6e}")
    print(f"wrote model  {out}")
    print(f"wrote labels {labels_path} ({model.labels_.size} samples, "
          f"{np.unique(model.labels_).size} clusters)")
    if args.plot_objective:
        from .plotting import plot_objective
        plot_objective(model, path=args.plot_objective)
        print(f"wrote objective plot {args.plot_objective}")
    if y is not None and not interrupted:
        print(f"against the labels in {args.data}: {_scores_line(evaluate(y, model.labels_))}")
    return 130 if interrupted else 0


def cmd_predict(args):
    import numpy as np
    from .estimators.clustering import load
    if args.out:
        _check_output(args.out, "--out", _LABEL_EXT)
    model = load(args.model)
    X, _ = _load_data(args, quiet=True)
    from .engine.loop import Report
    with Report(1):   # says so when the kernels compile (first call)
        labels = model.set_params(n_jobs=args.n_jobs).predict(X, reject=args.reject)
    if args.out:
        write_labels(args.out, labels)
        rejected = f", {int(np.sum(labels == -1))} rejected (-1)" if args.reject else ""
        print(f"wrote labels {args.out} ({labels.size} samples{rejected})")
    else:
        sys.stdout.write("".join(f"{int(v)}\n" for v in labels))
    return 0


def cmd_evaluate(args):
    import numpy as np
    from .metrics import evaluate
    pred = read_labels(args.predicted, args.predicted_key)
    true = read_labels(args.truth, args.key)
    if pred.shape[0] != true.shape[0]:
        raise CLIError(f"{args.predicted} has {pred.shape[0]} labels, {args.truth} has "
                       f"{true.shape[0]}")
    scores = evaluate(true, pred)
    if args.json:
        print(json.dumps(scores))
    else:
        print(f"{pred.shape[0]} samples, {np.unique(pred).size} clusters, "
              f"{np.unique(true).size} classes")
        print(_scores_line(scores))
    return 0


def cmd_demo(args):
    import numpy as np
    from sklearn.cluster import KMeans

    from . import __version__
    from .estimators.clustering import NTClustering
    from .datasets import load_demo
    from .metrics import evaluate

    q = args.quiet
    t_start = time.perf_counter()
    plot = not args.no_plot
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            plot = False
            _status("matplotlib is not installed: no pictures (pip install \"ntnumba[plot]\")")
        else:
            if args.out is None:      # never into the working tree unless asked
                import tempfile
                args.out = tempfile.mkdtemp(prefix="ntnumba-demo-")
            os.makedirs(args.out, exist_ok=True)
            _check_output(os.path.join(args.out, "clusters.png"), "--out")
    X, y = load_demo(args.resolution)
    images, _ = load_demo("32x32")
    n, N = X.shape
    C = int(y.max()) + 1
    _status(f"ntnumba {__version__} demo: COIL-20 shipped with the package ({n} images of {C} "
            f"objects), clustered at {args.resolution.replace('x', ' x ')} pixels "
            f"({N} features)", q)

    _status("[1/4] compiling the numba kernels (first call in this process) ...", q)
    t = time.perf_counter()
    rng = np.random.default_rng(0)
    NTClustering(2, n_components=8, max_iter=1, random_state=0).fit(
        rng.standard_normal((16, 4)))
    _status(f"      done in {time.perf_counter() - t:.1f} s", q)

    # image data: the graph mode (spectral partition of the NT-similarity k-NN graph)
    model = NTClustering(C, random_state=args.seed)
    if args.n_components is not None:
        model.set_params(n_components=args.n_components)
    if args.max_iter is not None:
        model.set_params(max_iter=args.max_iter)
    _status(f"[2/4] {model!r} (other parameters: the defaults)", q)
    model.set_params(n_jobs=args.n_jobs, verbose=0 if q else 1)
    t = time.perf_counter()
    interrupted = _fit_keeping_interrupt(model, X)
    t_nt = time.perf_counter() - t
    if interrupted:
        if getattr(model, "n_iter_", 0) == 0:
            _status("interrupted before the fit kept a completed iteration")
            return 130
        _status(f"interrupted: showing iteration {model.n_iter_}")

    _status(f"[3/4] KMeans(n_clusters={C}, n_init=10, random_state={args.seed}) for "
            "comparison ...", q)
    t = time.perf_counter()
    km = KMeans(C, n_init=10, random_state=args.seed).fit(X)
    t_km = time.perf_counter() - t

    written = []
    if plot:
        from .plotting import (assignment_scores, montage_size, plot_cluster_montage,
                               plot_objective, plot_score_histogram)
        _status("[4/4] drawing the pictures ...", q)
        score, _ = assignment_scores(model, X)
        p = os.path.join(args.out, "clusters.png")
        plot_cluster_montage(images, model.labels_, (32, 32), n_per_cluster=DEMO["n_per_cluster"],
                             order=score, true_labels=y, path=p,
                             title="NTClustering on COIL-20: one row per cluster, "
                                   "most typical first")
        n_rows = np.unique(model.labels_).size
        w, h = montage_size(n_rows, DEMO["n_per_cluster"])
        written.append((p, f"{w} x {h} px, one row of {DEMO['n_per_cluster']} images per "
                           "cluster"))
        if model.n_iter_ > 1:
            p = os.path.join(args.out, "objective.png")
            plot_objective(model, path=p)
            written.append((p, "700 x 320 px, objective per iteration"))
        p = os.path.join(args.out, "scores.png")
        plot_score_histogram(score, threshold=model.reject_threshold_, path=p,
                             xlabel="assignment score (the rejection option's)")
        written.append((p, "600 x 350 px, assignment scores and the threshold of "
                           "predict(X, reject='auto')"))
    else:
        _status("[4/4] no pictures", q)

    nt = evaluate(y, model.labels_)
    kmv = evaluate(y, km.labels_)
    print(f"COIL-20 ({n} images, {C} objects) at {args.resolution}:")
    print(f"  {'method':<14}{'CA':>7}{'NMI':>7}{'ARI':>7}{'time':>9}")
    for name, s, tt in (("NTClustering", nt, t_nt), ("KMeans", kmv, t_km)):
        print(f"  {name:<14}{s['ca']:7.3f}{s['nmi']:7.3f}{s['ari']:7.3f}{tt:8.1f}s")
    for p, what in written:
        print(f"wrote {p} ({what})")
    print(f"total {time.perf_counter() - t_start:.1f} s")
    return 130 if interrupted else 0


def _blas_threads(n):
    """Limit the BLAS thread pools (threadpoolctl, a scikit-learn dependency); 0 = no limit."""
    from contextlib import nullcontext
    if not n:
        return nullcontext()
    from threadpoolctl import threadpool_limits
    return threadpool_limits(limits=n, user_api="blas")


# ------------------------------------------------------------------------------ parser
def _add_data_options(p):
    g = p.add_argument_group("reading DATA (any file ntnumba.datasets.load_file reads: "
                             ".mat, .npz, .npy, a .csv/.tsv/.txt table, also compressed "
                             "(.csv.gz, .bz2, .xz, .zip), or .parquet)")
    g.add_argument("--data-key", help="array holding the data in a .mat/.npz file "
                                      "(default: X, fea, images, data, else the largest)")
    g.add_argument("--target-key", metavar="KEY",
                   help="the labels: an array of a .mat/.npz file (default: Y, gnd, labels, y, "
                        "target), or a column of a table by name, 0-based position (-1 = "
                        "last) or 'last' (default: the column named target, label, labels, "
                        "class, y or gnd); 'none': no labels, every column is a feature")
    g.add_argument("--delimiter", metavar="D",
                   help="tables: field delimiter, e.g. ',' ';' tab '|' whitespace (default: "
                        "detected)")
    g.add_argument("--header", type=_header, default="auto", metavar="auto|yes|no",
                   help="tables: is the first line column names? (default auto: when a field "
                        "is not a number)")
    g.add_argument("--index-col", metavar="COL",
                   help="tables: a column to drop, by name or position (default: an unnamed "
                        "first column, as pandas' to_csv writes the index; 'none')")
    g.add_argument("--image-shape", type=_shape, metavar="HxW",
                   help="shape of one image when the rows are flat images")
    g.add_argument("--order", choices=("F", "C"), default="F",
                   help="how a flat row is an image: F (MATLAB, default) or C")
    g.add_argument("--resize", type=_shape, metavar="HxW",
                   help="resample every image to HxW (area averaging)")
    g.add_argument("--normalize", action="store_true",
                   help="zero mean and unit variance per sample (as the paper's images)")


def _add_fit_options(p):
    from .estimators.clustering import ASSIGN_RULES, INITS, NTClustering
    p.add_argument("data", metavar="DATA", help="data file (.mat, .npz, .npy, a .csv/.tsv/"
                                                ".txt table, maybe .gz/.bz2/.xz/.zip, or "
                                                ".parquet)")
    p.add_argument("-k", "--n-clusters", type=_positive_int, required=True, metavar="C",
                   help="number of clusters")
    p.add_argument("-o", "--out", required=True, metavar="MODEL",
                   help="model file to write (.npz appended when missing)")
    p.add_argument("--labels", metavar="PATH",
                   help="labels file to write, .csv or .npy (default: MODEL.labels.csv)")
    p.add_argument("--plot-objective", metavar="PNG",
                   help="also draw the objective per iteration (needs matplotlib)")
    g = p.add_argument_group("model (the NTClustering parameters; defaults as in the library)")
    d = NTClustering().get_params()
    g.add_argument("--n-components", type=_components, default=d["n_components"],
                   metavar="M|auto",
                   help=f"dimension of the NT representations; below n_features the model "
                        f"of the rows' principal subspace; 'auto': 2100 "
                        f"(default {d['n_components']})")
    g.add_argument("--n-similarity", type=_positive_int, default=d["n_similarity"],
                   metavar="CS", help=f"number of similarity parameters "
                                      f"(default {d['n_similarity']})")
    g.add_argument("--no-transform", action="store_true",
                   help="A = I: alternate Stages 1 and 2 only (fast)")
    g.add_argument("--assign", choices=sorted(ASSIGN_RULES), default=d["assign"],
                   help=f"assignment rule (default {d['assign']})")
    g.add_argument("--init", choices=sorted(INITS), default=d["init"],
                   help=f"initialisation (default {d['init']})")
    g.add_argument("--n-neighbors", type=_positive_int, default=d["n_neighbors"], metavar="K",
                   help=f"k of the k-NN graph of the graph rule (default {d['n_neighbors']})")
    g.add_argument("--n-shared", type=_n_shared, default=d["n_shared"], metavar="R",
                   help="shared directions removed by the graph rule: 'auto', an integer, or "
                        f"candidates separated by commas (default {d['n_shared']})")
    g.add_argument("--max-iter", type=_positive_int, default=d["max_iter"],
                   help=f"default {d['max_iter']}")
    g.add_argument("--tol", type=_nonneg_float, default=d["tol"], help=f"default {d['tol']}")
    g.add_argument("--n-init", type=_positive_int, default=d["n_init"],
                   help=f"restarts (default {d['n_init']})")
    g.add_argument("--scaling", choices=("rms", "standard", "none"),
                   default=d["scaling"] or "none",
                   help="rms: one factor for all features (images); standard: centre and "
                        "scale every feature (tabular data with columns in different units); "
                        f"none (default {d['scaling'] or 'none'})")
    for name in ("lambda0", "lambda1", "lambda_e", "lambda_a", "lambda2", "lambda3", "lambda4"):
        g.add_argument(f"--{name.replace('_', '-')}", type=_nonneg_float, default=d[name],
                       help=f"default {d[name]}")
    g.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    g.add_argument("--n-jobs", type=_n_jobs, default=None,
                   help="numba threads (default: all; -1 all)")
    _add_data_options(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines or bars")


def build_parser(commands=None):
    """The :class:`argparse.ArgumentParser` of the ``ntnumba`` command.

    ``commands``: the commands whose options are needed (default: all). The options of ``fit``
    show the estimator's defaults, which imports numba and scikit-learn (seconds); ``ntnumba
    --help`` and the other commands do without.

    Returns
    -------
    parser : argparse.ArgumentParser

    Examples
    --------
    >>> from ntnumba.cli import build_parser
    >>> args = build_parser().parse_args(["fit", "data.csv", "-k", "3", "--out", "model"])
    >>> args.command, args.n_clusters
    ('fit', 3)
    """
    parser = _Parser(
        prog="ntnumba",
        description="Clustering with jointly learned nonlinear transforms (Kostadinov et al. "
                    "2019), accelerated with numba.",
        epilog="Run 'ntnumba COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the version and exit")
    parser.add_argument("--traceback", action="store_true",
                        help="show Python tracebacks instead of one-line errors")
    parser.add_argument("--blas-threads", type=_nonneg_int, default=1, metavar="N",
                        help="threads of NumPy's BLAS (default 1: the numba kernels use the "
                             "cores; 0 = BLAS default)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("demo", help="cluster COIL-20 (shipped, offline) and compare with KMeans",
                       description="Cluster the COIL-20 images shipped with the package, print "
                                   "CA/NMI/ARI next to KMeans and, with matplotlib, write "
                                   "pictures (cluster montage, score histogram, objective).")
    p.add_argument("--out", "--out-dir", metavar="FOLDER", default=None,
                   help="folder for the pictures, created if needed (default: a new temporary "
                        "folder, printed at the end)")
    p.add_argument("--no-plot", action="store_true", help="do not draw pictures")
    p.add_argument("--resolution", default=DEMO["resolution"],
                   help=f"image size used for clustering (default {DEMO['resolution']}; "
                        "'paper' = 20x25, '32x32' as shipped)")
    p.add_argument("--n-components", type=_components, default=None, metavar="M|auto",
                   help="M (default: the library's)")
    p.add_argument("--max-iter", type=_positive_int, default=None,
                   help="iterations (default: the library's; with more than one the objective "
                        "per iteration is drawn too)")
    p.add_argument("--seed", type=int, default=DEMO["seed"], help="random seed (default 0)")
    p.add_argument("--n-jobs", type=_n_jobs, default=None,
                   help="numba threads (default: all; -1 all)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("fit", help="fit a model to DATA; write the model and the labels",
                       description="Fit NTClustering to DATA and write the model (.npz, load it "
                                   "with ntnumba.load) and the training labels (.csv or .npy).")
    if commands is None or "fit" in commands:
        _add_fit_options(p)
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("predict", help="cluster labels of DATA with a saved model",
                       description="Assign every sample of DATA to a cluster with a model "
                                   "written by 'ntnumba fit' (pass the same data options).")
    p.add_argument("model", metavar="MODEL", help="model file (.npz)")
    p.add_argument("data", metavar="DATA", help="data file (.mat, .npz, .npy, .csv, "
                                                ".csv.gz, .parquet, ...)")
    p.add_argument("-o", "--out", metavar="PATH",
                   help="labels file to write, .csv or .npy (default: one label per line on "
                        "standard output)")
    p.add_argument("--reject", type=_reject, metavar="auto|T",
                   help="rejection option: label -1 for samples whose assignment score is above "
                        "T ('auto': the model's reject_threshold_)")
    p.add_argument("--n-jobs", type=_n_jobs, default=None,
                   help="numba threads (default: all; -1 all)")
    _add_data_options(p)
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("evaluate", help="CA, NMI and ARI of predicted labels",
                       description="Compare predicted labels with the true ones: clustering "
                                   "accuracy (Hungarian matching), NMI and ARI.")
    p.add_argument("predicted", metavar="PREDICTED",
                   help="predicted labels (.csv/.txt one per line, or .npy)")
    p.add_argument("truth", metavar="TRUTH",
                   help="true labels: a labels file, or a data file (.mat/.npz/.csv) with labels")
    p.add_argument("--key", help="labels array in a .mat/.npz TRUTH file, or the labels column "
                                 "of a data table by name, position or 'last' (default: "
                                 "auto-detect)")
    p.add_argument("--predicted-key", help="the same for PREDICTED")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_evaluate)
    return parser


def main(argv=None):
    """Run the ``ntnumba`` command; returns the exit status.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 1 on an error (one line on standard error), 2 on a usage error, 130 when
        interrupted.

    Examples
    --------
    >>> from ntnumba.cli import main
    >>> main(["--version"])  # doctest: +ELLIPSIS
    ntnumba ...
    0
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(commands=[a for a in argv if a in _COMMANDS])
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # --help, --version, usage errors: argparse's own status
        return exc.code if isinstance(exc.code, int) else 1

    def one_line(message, category, *rest, **kw):
        print(f"ntnumba {args.command}: warning: {message}", file=sys.stderr, flush=True)

    try:
        with _blas_threads(args.blas_threads), warnings.catch_warnings():
            warnings.showwarning = one_line
            return args.func(args)
    except KeyboardInterrupt:
        if args.traceback:
            raise
        print(f"ntnumba {args.command}: interrupted", file=sys.stderr)
        return 130
    except (CLIError, ValueError, TypeError, OSError, ImportError) as exc:
        if args.traceback:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"ntnumba {args.command}: error: {msg}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: say so in one line
        if args.traceback:
            raise
        print(f"ntnumba {args.command}: internal error: {type(exc).__name__}: {exc} "
              "(run with --traceback for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

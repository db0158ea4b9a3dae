"""Saving and loading fitted models in a documented, versioned ``.npz`` format (no pickle).

Format ``ntnumba-model``, version 3: a NumPy ``.npz`` archive (a zip file of ``.npy`` arrays,
read with ``allow_pickle=False``) with the keys below; their full description, the versions
and the reader's checks are in docs/model_format.md.

========================  =====================================================================
key                       content
========================  =====================================================================
``format``                the string ``"ntnumba-model"``
``format_version``        integer, 3
``ntnumba_version``       the version of the library that wrote the file (informative)
``params``                JSON of ``get_params()`` (``random_state`` kept only if an int/None)
``components_``           A, (M, N)
``dissimilarity_``        tau, (C, M)
``similarity_``           nu, (Cs, M)
``objective_history_``    float64, (n_iter,)
``labels_``               int64, (n_train,)
``similarity_labels_``    int64, (n_train,)
``n_iter_``               integer
``n_features_in_``        integer
``scale_``                float, the data scaling factor
``initial_labels_``       optional (version 3): int64, (n_initial,), the partition the fit
                          started from
``rng_state_``            optional (version 3): float64, (627,), the fit's MT19937 state
``reject_threshold_``     optional: float, the threshold of ``predict(X, reject="auto")``
``outlier_scores_``       optional: float64, (n_train,), the training samples' rejection scores
``probabilities_``        optional: float64, (n_train,), the soft score of the own cluster
``feature_mean_``         ``scaling="standard"`` only: float64, (N,), per-feature means
``feature_scale_``        ``scaling="standard"`` only: float64, (N,), 1 / standard deviations
``feature_names_in_``     optional: unicode strings, (N,), when fitted on a DataFrame
``n_shared_``             ``assign="graph"`` only: integer, shared directions removed
``graph_cut_``            ``assign="graph"`` only: float, normalised cut of the partition
``shared_mean_``          ``assign="graph"`` only: (N,), mean of the graph's training rows
``shared_components_``    ``assign="graph"`` only: (n_shared_, N), the shared directions
``fit_X_``                ``assign="graph"`` only: (n_ref, N), the scaled reference rows of
                          the k-NN vote of ``predict``
``fit_labels_``           ``assign="graph"`` only (version 3): int64, (n_ref,), their clusters
``ref_rows_``             ``assign="graph"`` only (version 3), fits of more than 20000 rows:
                          int64, (n_ref,), increasing, the rows of ``fit_X_`` among the training
``stream_count_``, ...    ``partial_fit`` only (version 3): its running sums (``stream_*_``)
========================  =====================================================================

A reader of version ``v`` reads every file of a version ``<= v`` and ignores unknown keys; newer
files, version-1 files of ``assign="graph"`` and truncated, corrupted or foreign files are
refused (``ValueError`` naming the file). A model file is untrusted input: only a regular file
is opened, and each entry's ``.npy`` header is checked before it is decompressed, then its
values. ``save`` is atomic (a synced temporary file renamed). Files of the removed options
``relabel``, ``prototypes`` and ``n_dissimilarity`` load with them ignored.
"""
import contextlib
import dataclasses
import json
import math
import os
import re
import stat
import struct
import tokenize
import types
import uuid
import zipfile
import zlib

import numpy as np

from ..engine.fitted import FittedModel
from ..engine.loop import State
from ..model.transform import TransformStatistics

FORMAT = "ntnumba-model"
FORMAT_VERSION = 3
_ARRAYS = ("components_", "dissimilarity_", "similarity_", "objective_history_", "labels_",
           "similarity_labels_")
_SCALARS = ("params", "n_iter_", "n_features_in_", "scale_")
# optional fitted attributes: (file key, attribute, kind); kind None = array
_OPTIONAL = (("reject_threshold_", "reject_threshold_", float),
             ("n_shared_", "n_shared_", int), ("graph_cut_", "graph_cut_", float),
             ("shared_mean_", "shared_mean_", None),
             ("shared_components_", "shared_components_", None),
             ("outlier_scores_", "outlier_scores_", None),
             ("probabilities_", "probabilities_", None),
             ("feature_mean_", "feature_mean_", None),
             ("feature_scale_", "feature_scale_", None),
             ("initial_labels_", "initial_labels_", None))
_GRAPH = ("n_shared_", "graph_cut_", "shared_mean_", "shared_components_", "fit_X_")
# the optional per-sample cluster labels (int64 in the file, within [0, n_clusters))
_LABELS = ("initial_labels_", "fit_labels_")
_MT_KEYS = 624  # words of the MT19937 state of numpy.random.RandomState
# partial_fit's running sums of the Stage-2 statistics (file key: stream_<name>_), and which
# must not be negative
_STREAM_THETA = ("count", "sum_q", "sum_qq", "sum_wy_pos", "sum_wy_neg", "sum_yy")
_STREAM_NONNEGATIVE = ("count", "sum_qq", "sum_yy")
# parameters of earlier versions that files may still hold in ``params``: ignored on load
_REMOVED_PARAMS = ("relabel", "prototypes", "n_dissimilarity")


class UnreadableParameters(TypeError):
    """Raised by the ``params_of`` of :func:`read_model` for parameters the estimator does not
    take (the file's ``params`` entry is unreadable, not merely invalid)."""


def _stream_payload(stream):
    """The entries of ``partial_fit``'s running sums ``stream`` (none unless the model's last
    update was a ``partial_fit``: the next one continues them)."""
    if not stream or stream.get("theta") is None:
        return {}
    out = {f"stream_{k}_": np.asarray(stream["theta"][k], dtype=np.float64)
           for k in _STREAM_THETA}
    out["stream_n_seen_"] = np.array(int(stream["n_seen"]))
    t = stream.get("transform")
    if t is not None:
        out.update(stream_gram_=np.asarray(t.gram, dtype=np.float64),
                   stream_cross_=np.asarray(t.cross, dtype=np.float64),
                   stream_target_sq_=np.array(float(t.target_sq)),
                   stream_n_samples_=np.array(int(t.n_samples)))
    return out


def _read_stream(f, C, Cs, M, N, learn_transform):
    """``partial_fit``'s running sums of the archive ``f`` (None when it has none), every
    entry of the shape the model's dimensions give, finite, counts and squares not
    negative: ``{"theta": {name: array}, "n_seen": int, "transform": None or (gram, cross,
    target_sq, n_samples)}``."""
    if "stream_count_" not in f:
        return None
    shapes = {"count": (C, Cs), "sum_q": (C, Cs, M), "sum_qq": (C, Cs), "sum_wy_pos": (C, M),
              "sum_wy_neg": (C, M), "sum_yy": (C, M)}
    keys = [f"stream_{k}_" for k in _STREAM_THETA] + ["stream_n_seen_"]
    if learn_transform:
        keys += ["stream_gram_", "stream_cross_", "stream_target_sq_", "stream_n_samples_"]
    missing = [k for k in keys if k not in f]
    if missing:
        f.fail(f"partial_fit's running sums are missing {missing}")
    theta = {k: f.array(f"stream_{k}_", shapes[k], "f").astype(np.float64)
             for k in _STREAM_THETA}
    n_seen = f.scalar("stream_n_seen_", int)
    transform = None
    if learn_transform:
        transform = (f.array("stream_gram_", (N, N), "f").astype(np.float64),
                     f.array("stream_cross_", (M, N), "f").astype(np.float64),
                     f.scalar("stream_target_sq_", float), f.scalar("stream_n_samples_", int))
    sums = list(theta.values()) + ([] if transform is None else list(transform[:3]))
    if not all(np.all(np.isfinite(a)) for a in sums):
        f.fail("partial_fit's running sums contain NaN or inf")
    if any(np.any(theta[k] < 0) for k in _STREAM_NONNEGATIVE) or n_seen < 0 or (
            transform is not None and (transform[2] < 0 or transform[3] < 0)):
        f.fail("partial_fit's running sums have negative counts or sums of squares")
    return {"theta": theta, "n_seen": n_seen, "transform": transform}


def _rng_to_array(state):
    """``RandomState.get_state()`` as the float64 array of ``rng_state_`` (exact: the keys are
    32-bit, the position at most 624)."""
    name, keys, pos, has_gauss, cached = state
    if name != "MT19937" or len(keys) != _MT_KEYS:
        raise ValueError(f"random state {name!r} with {len(keys)} keys: not MT19937")
    return np.concatenate([np.asarray(keys, dtype=np.float64),
                           np.array([pos, has_gauss, cached], dtype=np.float64)])


def _rng_from_array(a):
    """The ``RandomState.get_state()`` tuple of a ``rng_state_`` array (shape checked), or
    None when its values are not one (non-integer or out-of-range keys, position or flag)."""
    keys, (pos, has_gauss, cached) = a[:_MT_KEYS], a[_MT_KEYS:]
    ints = np.concatenate([keys, [pos, has_gauss]])
    if not (np.all(np.isfinite(a)) and np.all(ints == np.floor(ints)) and np.all(keys >= 0)
            and np.all(keys < 2.0 ** 32) and 0 <= pos <= _MT_KEYS and has_gauss in (0, 1)):
        return None
    state = ("MT19937", keys.astype(np.uint32), int(pos), int(has_gauss), float(cached))
    try:
        np.random.RandomState().set_state(state)
    except ValueError:
        return None
    return state


def save_model(path, params, attrs, fitted):
    """Write a fitted model to ``path`` (``.npz`` appended if absent): its parameters
    ``params`` (``get_params()``), public fitted attributes ``attrs`` and
    :class:`~ntnumba.engine.fitted.FittedModel` ``fitted``. Returns the path written."""
    from .. import __version__
    params = dict(params)
    rs = params["random_state"]
    if not (rs is None or isinstance(rs, (int, np.integer))):
        params["random_state"] = None
    params = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in params.items()}
    payload = {name: np.asarray(attrs[name]) for name in _ARRAYS}
    if "feature_names_in_" in attrs:
        payload["feature_names_in_"] = np.asarray(attrs["feature_names_in_"], dtype=str)
    for key, attr, kind in _OPTIONAL:
        if attr in attrs:
            value = attrs[attr]
            payload[key] = np.array(kind(value)) if kind is not None else np.asarray(value)
    if fitted.ref_X is not None:
        payload["fit_X_"] = np.asarray(fitted.ref_X)
    if fitted.ref_labels is not None:
        payload["fit_labels_"] = np.asarray(fitted.ref_labels)
    for key in _LABELS:
        if key in payload:
            payload[key] = payload[key].astype(np.int64, copy=False)
    payload.update(_stream_payload(fitted.stream))
    rows = fitted.ref_rows()
    if rows is not None:
        payload["ref_rows_"] = np.asarray(rows, dtype=np.int64)
    if fitted.rng_state is not None:
        payload["rng_state_"] = _rng_to_array(fitted.rng_state)
    path = os.fspath(path)
    if not path.endswith(".npz"):
        path += ".npz"
    payload.update(format=np.array(FORMAT), format_version=np.array(FORMAT_VERSION),
                   ntnumba_version=np.array(__version__), params=np.array(json.dumps(params)),
                   n_iter_=np.array(attrs["n_iter_"]),
                   n_features_in_=np.array(attrs["n_features_in_"]),
                   scale_=np.array(float(attrs["scale_"])))
    _write_atomic(path, lambda f: np.savez_compressed(f, **payload))
    return path


# a temporary file of save: hidden, in the destination folder, ".<name>.<pid>-<8 hex>.tmp.npz"
_TMP_PATTERN = re.compile(r"^\..+\.\d+-[0-9a-f]{8}\.tmp\.npz$")
_STALE_SECONDS = 3600


def _write_atomic(path, write):
    """Write ``path`` through ``write(file)``: into a temporary file of the destination's folder,
    synced to disk, then renamed over it (atomic), the folder synced too.

    Symbolic links are written through; permission bits (owner and group where allowed) are
    kept; stale temporary files (an hour untouched) are removed (docs/model_format.md).
    """
    target = os.path.realpath(path)   # through symbolic links
    folder, base = os.path.split(target)
    try:
        old = os.stat(target)
    except FileNotFoundError:
        old = None
    _remove_stale(folder)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp.npz")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     0o666)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if old is not None:
            _keep_mode(tmp, old)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    _sync_folder(folder)


def _keep_mode(tmp, old):
    """The permission bits (and where allowed owner and group) of the replaced file."""
    st = os.stat(tmp)
    if (st.st_uid, st.st_gid) != (old.st_uid, old.st_gid) and hasattr(os, "chown"):
        with contextlib.suppress(OSError):   # only root may give a file away
            os.chown(tmp, old.st_uid, old.st_gid)
    os.chmod(tmp, stat.S_IMODE(old.st_mode))


def _sync_folder(folder):
    """fsync the folder, so that the rename survives a crash (not possible on Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_stale(folder):
    """Remove save's temporary files in ``folder`` untouched for an hour (left by a killed
    process); errors are ignored (another process may remove them first)."""
    import time
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not _TMP_PATTERN.match(entry.name):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) and (
                    now - entry.stat(follow_symlinks=False).st_mtime > _STALE_SECONDS):
                os.remove(entry.path)


# Bounds of the reader (a model file is untrusted input: nothing is allocated or decompressed
# before its declared size has been checked against the model's own dimensions).
_MAX_SMALL = 1 << 20      # bytes of a scalar entry (``params`` JSON included)
_MAX_NAME = 4096          # characters of a feature name
_MAX_HEADER = 10_000      # bytes of an .npy header (numpy's own default limit)
# Deflate expands at most 1032-fold: an entry declaring more data than that per compressed
# byte is a lie, refused before any allocation (a margin for the .npy header and zip framing).
_DEFLATE_RATIO = 1032
_SLACK = 1 << 16
_READER_ERRORS = (ValueError, TypeError, ArithmeticError, LookupError, AttributeError,
                  RecursionError, NotImplementedError, UnicodeError, EOFError, SyntaxError,
                  zipfile.BadZipFile, zlib.error, struct.error, OSError,
                  tokenize.TokenError)  # numpy's .npy header parser on a damaged header


def _memory_budget():
    """Bytes a model file may declare in all: half the memory available (the reader may hold
    an entry twice while converting it); None when unknown (no limit)."""
    from ..partition.graph import available_memory
    avail = available_memory()
    return None if avail is None else avail // 2


def _open_regular(path):
    """``path`` opened for reading, after checking that it is a regular file: a device
    (``/dev/zero`` reads forever), a FIFO (blocks until a writer comes) or a socket is refused
    at once, before and (against a swap in between) after opening, without blocking."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"path: no such model file: {path}") from None
    _check_regular(path, mode)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        _check_regular(path, os.fstat(fd).st_mode)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_regular(path, mode):
    if stat.S_ISDIR(mode):
        raise ValueError(f"path: {path} is a directory, not an ntnumba model file")
    if not stat.S_ISREG(mode):
        kind = ("a character device" if stat.S_ISCHR(mode) else "a block device"
                if stat.S_ISBLK(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise ValueError(f"path: {path} is {kind}, not an ntnumba model file: pass the .npz "
                         "file written by NTClustering.save")


class _Archive:
    """The entries of a model file, read one at a time and only on request.

    ``header(key)`` parses the ``.npy`` header of an entry (dtype, shape), ``array(key, shape)``
    checks the declared shape against ``shape`` (None: any, an int ``-1`` in it: that axis
    free) and the declared size against the entry's compressed size, and only then
    decompresses it into a preallocated array.
    """

    def __init__(self, path, file):
        self.path = path
        self.zip = zipfile.ZipFile(file)
        self.infos = {}
        for info in self.zip.infolist():
            if info.filename.endswith(".npy"):
                self.infos[info.filename[:-4]] = info
        self.budget = _memory_budget()
        self.declared = 0   # bytes declared by the entries read so far

    def close(self):
        self.zip.close()

    def __contains__(self, key):
        return key in self.infos

    def fail(self, msg):
        raise ValueError(f"path: {self.path}: {msg}: corrupted model file")

    def _open(self, key):
        """The entry's stream (an entry marked encrypted, which model files never are, is a
        damaged file: zipfile would raise RuntimeError asking for a password)."""
        info = self.infos[key]
        if info.flag_bits & 0x1:
            self.fail(f"entry {key!r} is marked encrypted")
        return self.zip.open(info)

    def header(self, key):
        with self._open(key) as fp:
            version = np.lib.format.read_magic(fp)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(
                    fp, max_header_size=_MAX_HEADER)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(
                    fp, max_header_size=_MAX_HEADER)
            else:
                self.fail(f"entry {key!r} has an unknown .npy version {version}")
            offset = fp.tell()
        if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or (
                dtype.kind not in "biufU"):
            self.fail(f"entry {key!r} has dtype {dtype}, not a plain numeric or string dtype")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            self.fail(f"entry {key!r} has an invalid shape {shape}")
        return dtype, tuple(shape), fortran, offset

    def array(self, key, shape=None, kinds="biufU", max_bytes=None):
        dtype, declared, fortran, offset = self.header(key)
        if dtype.kind not in kinds:
            self.fail(f"entry {key!r} has dtype {dtype}")
        if shape is not None and (len(declared) != len(shape) or any(
                s != -1 and s != d for s, d in zip(shape, declared))):
            want = tuple("n" if s == -1 else s for s in shape)
            self.fail(f"{key} has shape {declared}, expected {want}")
        nbytes = dtype.itemsize * math.prod(declared)  # Python ints: no overflow
        info = self.infos[key]
        limit = info.compress_size * (
            _DEFLATE_RATIO if info.compress_type != zipfile.ZIP_STORED else 1) + _SLACK
        if max_bytes is not None and nbytes > max_bytes:
            self.fail(f"entry {key!r} declares {nbytes} bytes (shape {declared}), more than "
                      f"the {max_bytes} its kind allows")
        if nbytes > limit or info.file_size != offset + nbytes:
            self.fail(f"entry {key!r} declares {nbytes} bytes of data (shape {declared}) "
                      f"in {info.compress_size} compressed bytes ({info.file_size} declared "
                      "by the archive)")
        self.declared += nbytes
        if self.budget is not None and self.declared > self.budget:
            raise ValueError(
                f"path: {self.path}: entry {key!r} declares {nbytes} bytes (shape {declared}), "
                f"which makes {self.declared} bytes with the entries before it, more than half "
                f"of the {2 * self.budget} bytes of memory available: not loaded (a damaged or "
                "crafted model file, or a model too large for this machine)")
        out = np.empty(declared, dtype=dtype, order="F" if fortran else "C")
        view = memoryview(out.reshape(-1, order="A").view(np.uint8)) if nbytes else None
        with self._open(key) as fp:
            fp.read(offset)  # the header (at most _MAX_HEADER bytes)
            got = fp.readinto(view) if nbytes else 0
            if got != nbytes or fp.read(1):
                self.fail(f"entry {key!r} holds {got} bytes, not the {nbytes} declared")
        if not dtype.isnative:
            out = out.astype(dtype.newbyteorder("="))
        return out if out.flags.c_contiguous else np.ascontiguousarray(out)

    def scalar(self, key, kind):
        a = self.array(key, shape=(), max_bytes=_MAX_SMALL)
        try:
            if kind is str:
                if a.dtype.kind != "U":
                    raise TypeError
                return str(a[()])
            if a.dtype.kind == "U":
                raise TypeError
            value = a.item()
            if kind is int and (isinstance(value, float) or a.dtype.kind == "b"):
                raise TypeError
            return kind(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"entry {key!r} is not a {kind.__name__} scalar (dtype {a.dtype})")


def _check_arrays(model, p, ref_X, ref_labels, path):
    """Values consistent with the parameters ``p``: finite, labels in range, positive scale
    (``model``: the public attributes read, ``ref_X``, ``ref_labels``: the reference set)."""
    bad = None
    A, tau, nu = model.components_, model.dissimilarity_, model.similarity_
    graph = [a for a in (ref_X, getattr(model, "shared_mean_", None),
                         getattr(model, "shared_components_", None)) if a is not None]
    labels = [a for a in (getattr(model, "initial_labels_", None), ref_labels) if a is not None]
    if not (A.dtype == tau.dtype == nu.dtype):
        bad = "components_, dissimilarity_ and similarity_ have different dtypes"
    elif not all(np.all(np.isfinite(a)) for a in (A, tau, nu)):
        bad = "the parameters contain NaN or inf"
    elif not all(np.all(np.isfinite(a)) for a in graph):
        bad = "fit_X_, shared_mean_ or shared_components_ contain NaN or inf"
    elif not np.all(np.isfinite(model.objective_history_)):
        bad = "objective_history_ contains NaN or inf"
    elif model.labels_.size and not (0 <= model.labels_.min()
                                     and model.labels_.max() < p.n_clusters):
        bad = (f"labels_ range from {model.labels_.min()} to {model.labels_.max()}, outside "
               f"[0, {p.n_clusters})")
    elif model.similarity_labels_.size and not (
            0 <= model.similarity_labels_.min()
            and model.similarity_labels_.max() < p.n_similarity):
        bad = f"similarity_labels_ outside [0, {p.n_similarity})"
    elif not (np.isfinite(model.scale_) and model.scale_ > 0):
        bad = f"scale_ must be a positive number, got {model.scale_}"
    elif model.n_iter_ < 0 or model.objective_history_.shape[0] > model.n_iter_:
        bad = (f"n_iter_ is {model.n_iter_} with {model.objective_history_.shape[0]} "
               "objective values")
    elif np.any(np.isnan(getattr(model, "outlier_scores_", 0.0))):
        bad = "outlier_scores_ contains NaN"
    elif not np.all((0.0 <= getattr(model, "probabilities_", 0.0))
                    & (getattr(model, "probabilities_", 0.0) <= 1.0)):
        bad = "probabilities_ must be in [0, 1]"
    elif any(a.size and not (0 <= a.min() and a.max() < p.n_clusters) for a in labels):
        bad = f"initial_labels_ or fit_labels_ outside [0, {p.n_clusters})"
    elif np.isnan(getattr(model, "reject_threshold_", 0.0)):
        bad = "reject_threshold_ is NaN"
    elif not np.isfinite(getattr(model, "graph_cut_", 0.0)):
        bad = "graph_cut_ is not finite"
    if bad:
        raise ValueError(f"path: {path}: {bad}: corrupted model file")


def _params_from_json(text):
    """The ``params`` entry as keyword arguments of NTClustering (TypeError if malformed)."""
    params = json.loads(text)
    if not isinstance(params, dict):
        raise TypeError(f"params is a {type(params).__name__}, not an object")
    out = {}
    for k, v in params.items():
        # JSON has no tuples: sequences (e.g. n_shared) come back as lists of numbers
        if isinstance(v, list):
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
                raise TypeError(f"{k} is a list of non-numbers")
            v = tuple(v)
        elif not (v is None or isinstance(v, (bool, int, float, str))):
            raise TypeError(f"{k} has a value of type {type(v).__name__}")
        out[k] = v
    return out


def read_model(path, params_of):
    """The model stored in ``path`` as ``(params, attrs, fitted)``: the estimator's parameters,
    its public fitted attributes and its :class:`~ntnumba.engine.fitted.FittedModel` (see
    :func:`ntnumba.load`).

    ``params_of(params, n_features)`` validates the parameters and returns the
    :class:`~ntnumba.engine.loop.Params` that give every entry's shape. Raises
    ``FileNotFoundError`` or ``ValueError`` naming the file.
    """
    path = os.fspath(path)
    with _open_regular(path) as file:  # PermissionError and the like as themselves
        if not zipfile.is_zipfile(file):
            raise ValueError(f"path: {path} is not an ntnumba model file (not an .npz archive; "
                             "truncated, or some other kind of file)")
        file.seek(0)
        return _read_archive(path, file, params_of)


def _read_archive(path, file, params_of):
    """The model of the open zip archive ``file``; every failure a ValueError naming ``path``."""
    archive = None
    try:
        archive = _Archive(path, file)
        return _load(archive, path, params_of)
    except ValueError as exc:
        if str(exc).startswith(f"path: {path}"):
            raise
        raise ValueError(f"path: {path} is not a readable ntnumba model file (truncated or "
                         f"corrupted: {exc})") from None
    except _READER_ERRORS as exc:
        raise ValueError(f"path: {path} is not a readable ntnumba model file (truncated or "
                         f"corrupted: {type(exc).__name__}: {exc})") from None
    finally:
        if archive is not None:
            archive.close()


def _load(f, path, params_of):
    """The model of the open archive ``f``: every entry checked before it is decompressed."""
    if "format" not in f or f.header("format")[0].kind != "U" or (
            f.scalar("format", str) != FORMAT):
        raise ValueError(f"path: {path} is not an ntnumba model file (no '{FORMAT}' marker)")
    if "format_version" not in f:
        raise ValueError(f"path: {path} has no format_version: corrupted model file")
    version = f.scalar("format_version", int)
    if version > FORMAT_VERSION:
        raise ValueError(f"path: {path} has model format version {version}, newer than this "
                         f"ntnumba reads ({FORMAT_VERSION}); upgrade ntnumba")
    if version < 1:
        raise ValueError(f"path: {path} has an invalid model format version {version}")
    missing = [k for k in _ARRAYS + _SCALARS if k not in f]
    if missing:
        raise ValueError(f"path: {path} is missing {missing}: truncated or corrupted model file")
    try:
        params = _params_from_json(f.scalar("params", str))
        for name in _REMOVED_PARAMS:  # options of older versions, ignored
            params.pop(name, None)
    except (ValueError, TypeError, RecursionError) as exc:
        raise ValueError(f"path: {path}: unreadable parameters ({type(exc).__name__}: {exc}): "
                         "corrupted model file") from None
    model = types.SimpleNamespace()   # the public fitted attributes, as they are read
    model.n_iter_ = f.scalar("n_iter_", int)
    model.n_features_in_ = N = f.scalar("n_features_in_", int)
    model.scale_ = f.scalar("scale_", float)
    if N < 1:
        f.fail(f"n_features_in_ is {N}")
    try:
        p = params_of(params, N)
    except UnreadableParameters as exc:
        raise ValueError(f"path: {path}: unreadable parameters (TypeError: {exc}): corrupted "
                         "model file") from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise ValueError(f"path: {path}: invalid parameters ({exc}): corrupted model "
                         "file") from None
    for key, attr, kind in _OPTIONAL:
        if key in f and kind is not None:
            setattr(model, attr, f.scalar(key, kind))
    if p.rule == "graph" and version < 2:
        raise ValueError(f"path: {path} is an assign='graph' model of format version {version},"
                         " written before the graph rule compared the samples in their own "
                         "dimensions; this ntnumba cannot reproduce its predictions: fit the "
                         "model again and save it")
    if p.rule == "graph":
        missing = [k for k in _GRAPH if k not in f]
        if missing:
            raise ValueError(f"path: {path} is missing {missing} (needed by assign='graph'): "
                             "truncated or corrupted model file")
    # the declared shapes, from the model's own dimensions (n: the number of training samples)
    if (params.get("n_components", "auto") == "auto" and p.learn_transform
            and f.header("components_")[1] == (N, N) and N > p.n_components):
        p = dataclasses.replace(p, n_components=N)  # earlier "auto": max(2100, N)
    M = p.n_components if p.learn_transform else N
    C, Cs = p.n_clusters, p.n_similarity
    float_kinds = "f"
    model.components_ = f.array("components_", (M, N), float_kinds)
    model.dissimilarity_ = f.array("dissimilarity_", (C, M), float_kinds)
    model.similarity_ = f.array("similarity_", (Cs, M), float_kinds)
    history = f.header("objective_history_")[1]
    if len(history) == 1 and not 0 <= history[0] <= model.n_iter_:
        f.fail(f"n_iter_ is {model.n_iter_} with {history[0]} objective values")
    model.objective_history_ = f.array("objective_history_", (-1,), "f").astype(np.float64)
    model.labels_ = f.array("labels_", (-1,), "iu").astype(np.int64)
    n = model.labels_.shape[0]
    model.similarity_labels_ = f.array("similarity_labels_", (n,), "iu").astype(np.int64)
    if "initial_labels_" in f:  # n_initial: n unless a warm start continued on other data
        model.initial_labels_ = f.array("initial_labels_", (-1,), "iu").astype(np.int64)
    rng_state = None
    if "rng_state_" in f:
        rng_state = _rng_from_array(f.array("rng_state_", (_MT_KEYS + 3,), "f").astype(
            np.float64))
        if rng_state is None:
            f.fail("rng_state_ is not a MT19937 state")
    for key in ("outlier_scores_", "probabilities_"):  # optional, per training sample
        if key in f:
            setattr(model, key, f.array(key, (n,), "f").astype(np.float64))
    for key in ("feature_mean_", "feature_scale_"):  # scaling="standard": per feature
        if key in f:
            value = f.array(key, (N,), "f").astype(np.float64)
            if not np.all(np.isfinite(value)):
                f.fail(f"{key} contains NaN or inf")
            setattr(model, key, value)
    if "feature_names_in_" in f:
        model.feature_names_in_ = f.array("feature_names_in_", (N,), "U",
                                          max_bytes=4 * _MAX_NAME * N).astype(object)
    ref_rows = ref_X = ref_labels = None
    if p.rule == "graph":
        r = model.n_shared_
        if not 0 <= r <= N:
            f.fail(f"n_shared_ is {r}, outside [0, {N}]")
        model.shared_mean_ = f.array("shared_mean_", (N,), float_kinds)
        model.shared_components_ = f.array("shared_components_", (r, N), float_kinds)
        n_ref = n
        if "fit_labels_" in f:  # the reference set's own clusters (version 3)
            ref_labels = f.array("fit_labels_", (-1,), "iu").astype(np.int64)
            n_ref = ref_labels.shape[0]
        if "ref_rows_" in f and n_ref > n:   # a sample of the n training rows
            f.fail(f"the reference set has {n_ref} rows, more than the {n} training samples "
                   "it is a sample of")
        ref_X = f.array("fit_X_", (n_ref, N), float_kinds)
        if "ref_rows_" in f:
            ref_rows = f.array("ref_rows_", (n_ref,), "iu").astype(np.int64)
            if ref_rows.size and not (0 <= ref_rows[0] and ref_rows[-1] < n
                                      and np.all(np.diff(ref_rows) > 0)):
                f.fail(f"ref_rows_ must be increasing rows of [0, {n})")
    stream = _read_stream(f, C, Cs, M, N, p.learn_transform)
    _check_arrays(model, p, ref_X, ref_labels, path)
    attrs = vars(model)
    state = State(
        A=model.components_ if p.learn_transform else None, tau=model.dissimilarity_,
        nu=model.similarity_, labels=model.labels_, similarity_labels=model.similarity_labels_,
        objective_history=list(model.objective_history_), n_iter=model.n_iter_,
        initial_labels=getattr(model, "initial_labels_", None))
    if p.rule == "graph":
        state.graph = {"n_shared": model.n_shared_, "graph_cut": model.graph_cut_,
                       "mean": model.shared_mean_, "V": model.shared_components_,
                       "ref_rows": ref_rows}
    # files before version 3 have no random state: a warm start restarts it (seeded 0)
    fitted = FittedModel(params=p, state=state, ref_X=ref_X, ref_labels=ref_labels,
                         rng_state=(np.random.RandomState(0).get_state() if rng_state is None
                                    else rng_state),
                         sums_lost=version < 3)
    if stream is not None:  # the next partial_fit continues the saved stream
        t = stream["transform"]
        fitted.stream = {
            "theta": stream["theta"], "scale": model.scale_, "n_seen": stream["n_seen"],
            "transform": (None if t is None
                          else TransformStatistics(*t, model.components_.dtype)),
            "ref": ((ref_X, fitted.reference_labels(model.labels_)) if p.rule == "graph"
                    else None)}
    return params, attrs, fitted

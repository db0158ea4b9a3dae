"""Saving and loading fitted models in a documented, versioned ``.npz`` format (no pickle).

Format ``ntnumba-model``, version 1: a NumPy ``.npz`` archive (a zip file of ``.npy`` arrays,
read with ``allow_pickle=False``) with

========================  =====================================================================
key                       content
========================  =====================================================================
``format``                the string ``"ntnumba-model"``
``format_version``        integer, 1
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
``reject_threshold_``     optional: float, the threshold of ``predict(X, reject="auto")``
``outlier_scores_``       optional: float64, (n_train,), the training samples' rejection scores
``probabilities_``        optional: float64, (n_train,), the soft score of the own cluster
``feature_mean_``         ``scaling="standard"`` only: float64, (N,), per-feature means
``feature_scale_``        ``scaling="standard"`` only: float64, (N,), 1 / standard deviations
``feature_names_in_``     optional: unicode strings, (N,), when fitted on a DataFrame
``n_shared_``             ``assign="graph"`` only: integer, shared directions removed
``graph_cut_``            ``assign="graph"`` only: float, normalised cut of the partition
``shared_mean_``          ``assign="graph"`` only: (M,), mean of the training representations
``shared_components_``    ``assign="graph"`` only: (n_shared_, M), the shared directions
``fit_X_``                ``assign="graph"`` only: (n_train, N), the scaled training data, the
                          reference set of the out-of-sample k-NN vote of ``predict``
========================  =====================================================================

``components_``, ``dissimilarity_`` and ``similarity_`` share one dtype (float32 or float64, the
dtype of the training data). A reader of version ``v`` reads every file of a version ``<= v``
and ignores keys it does not know; a file of a newer ``format_version`` is refused with a clear
error, as are truncated, corrupted and foreign files (``ValueError`` naming the file). ``save``
writes to a temporary file in the destination folder and renames it, so an interrupted save
never leaves a truncated model behind.
"""
import json
import os
import uuid
import zipfile
import zlib

import numpy as np

FORMAT = "ntnumba-model"
FORMAT_VERSION = 1
_ARRAYS = ("components_", "dissimilarity_", "similarity_", "objective_history_", "labels_",
           "similarity_labels_")
_SCALARS = ("params", "n_iter_", "n_features_in_", "scale_")
# optional fitted attributes: (file key, attribute, kind); kind None = array
_OPTIONAL = (("reject_threshold_", "reject_threshold_", float),
             ("n_shared_", "n_shared_", int), ("graph_cut_", "graph_cut_", float),
             ("shared_mean_", "shared_mean_", None),
             ("shared_components_", "shared_components_", None),
             ("fit_X_", "_fit_X", None), ("outlier_scores_", "outlier_scores_", None),
             ("probabilities_", "probabilities_", None),
             ("feature_mean_", "feature_mean_", None),
             ("feature_scale_", "feature_scale_", None))
_GRAPH = ("n_shared_", "graph_cut_", "shared_mean_", "shared_components_", "fit_X_")


def save_model(model, path):
    """Write a fitted :class:`~ntnumba.NTClustering` to ``path`` (``.npz`` appended if absent)."""
    from sklearn.utils.validation import check_is_fitted

    from . import __version__
    check_is_fitted(model)
    params = model.get_params()
    rs = params["random_state"]
    if not (rs is None or isinstance(rs, (int, np.integer))):
        params["random_state"] = None
    params = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in params.items()}
    payload = {name: np.asarray(getattr(model, name)) for name in _ARRAYS}
    if hasattr(model, "feature_names_in_"):
        payload["feature_names_in_"] = np.asarray(model.feature_names_in_, dtype=str)
    for key, attr, kind in _OPTIONAL:
        if hasattr(model, attr):
            value = getattr(model, attr)
            payload[key] = np.array(kind(value)) if kind is not None else np.asarray(value)
    path = os.fspath(path)
    if not path.endswith(".npz"):
        path += ".npz"
    # a hidden temporary file in the destination folder (same file system: the rename is
    # atomic), created with the usual permissions
    folder, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{base}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp.npz")
    try:
        np.savez_compressed(tmp, format=np.array(FORMAT),
                            format_version=np.array(FORMAT_VERSION),
                            ntnumba_version=np.array(__version__),
                            params=np.array(json.dumps(params)),
                            n_iter_=np.array(model.n_iter_),
                            n_features_in_=np.array(model.n_features_in_),
                            scale_=np.array(float(model.scale_)), **payload)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def _read(path):
    """Every array of the archive, or a ValueError saying why the file is not readable."""
    if os.path.isdir(path):
        raise ValueError(f"path: {path} is a directory, not an ntnumba model file")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"path: {path} is not an ntnumba model file (not an .npz archive; "
                         "truncated, or some other kind of file)")
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as exc:
        raise ValueError(f"path: {path} is not a readable ntnumba model file (truncated or "
                         f"corrupted: {exc})") from None


def _scalar(data, key, kind, path):
    a = data[key]
    try:
        if a.shape != ():
            raise ValueError
        return kind(a.item()) if kind is not str else str(a[()])
    except (TypeError, ValueError):
        raise ValueError(f"path: {path}: entry {key!r} is not a {kind.__name__} scalar "
                         f"(dtype {a.dtype}, shape {a.shape}): corrupted model file") from None


def _check_arrays(model, path):
    """Shapes and dtypes consistent with each other and with the parameters."""
    A, tau, nu = model.components_, model.dissimilarity_, model.similarity_
    bad = None
    if not all(a.ndim == 2 and a.dtype in (np.float32, np.float64) for a in (A, tau, nu)):
        bad = "components_, dissimilarity_ and similarity_ must be 2-D float arrays"
    elif not (A.dtype == tau.dtype == nu.dtype):
        bad = "components_, dissimilarity_ and similarity_ have different dtypes"
    elif A.shape[1] != model.n_features_in_:
        bad = f"components_ has shape {A.shape}, n_features_in_ is {model.n_features_in_}"
    elif tau.shape != (model.n_clusters, A.shape[0]):
        bad = (f"dissimilarity_ has shape {tau.shape}, expected "
               f"({model.n_clusters}, {A.shape[0]})")
    elif nu.shape != (model.n_similarity, A.shape[0]):
        bad = (f"similarity_ has shape {nu.shape}, expected "
               f"({model.n_similarity}, {A.shape[0]})")
    elif not all(np.all(np.isfinite(a)) for a in (A, tau, nu)):
        bad = "the parameters contain NaN or inf"
    elif (model.labels_.ndim != 1 or model.labels_.shape != model.similarity_labels_.shape
          or model.labels_.dtype.kind not in "iu"
          or model.similarity_labels_.dtype.kind not in "iu"):
        bad = "labels_ and similarity_labels_ must be integer vectors of one length"
    elif model.objective_history_.ndim != 1:
        bad = "objective_history_ must be 1-D"
    elif not (np.isfinite(model.scale_) and model.scale_ > 0):
        bad = f"scale_ must be a positive number, got {model.scale_}"
    if bad:
        raise ValueError(f"path: {path}: {bad}: corrupted model file")


def load(path):
    """Load a model written by :meth:`NTClustering.save`.

    Parameters
    ----------
    path : str or path-like
        The ``.npz`` file.

    Returns
    -------
    model : NTClustering
        Fitted: ``predict``, ``transform`` and ``score`` work as on the saved model. Warm
        starting a loaded model restarts the random stream of the online variant.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is truncated or corrupted, not an ntnumba model, or of a newer format
        version than this library reads. The message names the file.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> import ntnumba
    >>> X = np.random.default_rng(0).standard_normal((30, 4))
    >>> model = ntnumba.NTClustering(2, n_components=8, random_state=0).fit(X)
    >>> path = model.save(os.path.join(tempfile.mkdtemp(), "model.npz"))
    >>> bool(np.array_equal(ntnumba.load(path).predict(X), model.predict(X)))
    True
    """
    from . import _driver
    from ._estimator import NTClustering
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"path: no such model file: {path}")
    data = _read(path)
    if "format" not in data or data["format"].dtype.kind != "U" or (
            _scalar(data, "format", str, path) != FORMAT):
        raise ValueError(f"path: {path} is not an ntnumba model file (no '{FORMAT}' marker)")
    if "format_version" not in data:
        raise ValueError(f"path: {path} has no format_version: corrupted model file")
    version = _scalar(data, "format_version", int, path)
    if version > FORMAT_VERSION:
        raise ValueError(f"path: {path} has model format version {version}, newer than this "
                         f"ntnumba reads ({FORMAT_VERSION}); upgrade ntnumba")
    if version < 1:
        raise ValueError(f"path: {path} has an invalid model format version {version}")
    missing = [k for k in _ARRAYS + _SCALARS if k not in data]
    if missing:
        raise ValueError(f"path: {path} is missing {missing}: truncated or corrupted model file")
    try:
        params = json.loads(_scalar(data, "params", str, path))
        # JSON has no tuples: sequences (e.g. n_shared) come back as lists
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
        model = NTClustering(**params)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"path: {path}: unreadable parameters ({exc}): corrupted model "
                         "file") from None
    for name in _ARRAYS:
        setattr(model, name, data[name])
    model.n_iter_ = _scalar(data, "n_iter_", int, path)
    model.n_features_in_ = _scalar(data, "n_features_in_", int, path)
    model.scale_ = _scalar(data, "scale_", float, path)
    if "feature_names_in_" in data:
        model.feature_names_in_ = data["feature_names_in_"].astype(object)
    for key, attr, kind in _OPTIONAL:
        if key in data:
            setattr(model, attr, _scalar(data, key, kind, path) if kind is not None
                    else data[key])
    if getattr(model, "assign", None) == "graph":
        missing = [k for k in _GRAPH if k not in data]
        if missing:
            raise ValueError(f"path: {path} is missing {missing} (needed by assign='graph'): "
                             "truncated or corrupted model file")
    _check_arrays(model, path)
    N = model.n_features_in_
    try:
        model._p = model._params(N)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"path: {path}: invalid parameters ({exc}): corrupted model "
                         "file") from None
    A = model.components_
    model._state = _driver.State(
        A=A if model._p.learn_transform else None, tau=model.dissimilarity_,
        nu=model.similarity_, labels=model.labels_, similarity_labels=model.similarity_labels_,
        objective_history=list(model.objective_history_), n_iter=model.n_iter_)
    if model._p.rule == "graph":
        model._state.graph = {"n_shared": model.n_shared_, "graph_cut": model.graph_cut_}
    model._rng_state = np.random.RandomState(0).get_state()
    return model

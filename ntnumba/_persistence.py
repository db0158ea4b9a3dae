"""Saving and loading fitted models in a documented, versioned ``.npz`` format (no pickle).

Format ``ntnumba-model``, version 1: a NumPy ``.npz`` archive (``allow_pickle=False``) with

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
========================  =====================================================================

A file of a newer ``format_version`` than this library reads is refused with a clear error.
"""
import json
import os
import zipfile

import numpy as np

FORMAT = "ntnumba-model"
FORMAT_VERSION = 1
_ARRAYS = ("components_", "dissimilarity_", "similarity_", "objective_history_", "labels_",
           "similarity_labels_")


def save_model(model, path):
    """Write a fitted :class:`~ntnumba.NTClustering` to ``path`` (``.npz`` appended if absent)."""
    from sklearn.utils.validation import check_is_fitted

    from . import __version__
    check_is_fitted(model)
    params = model.get_params()
    if not (params["random_state"] is None or isinstance(params["random_state"], (int, np.integer))):
        params["random_state"] = None
    params = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in params.items()}
    payload = {name: np.asarray(getattr(model, name)) for name in _ARRAYS}
    path = os.fspath(path)
    if not path.endswith(".npz"):
        path += ".npz"
    np.savez_compressed(path, format=np.array(FORMAT), format_version=np.array(FORMAT_VERSION),
                        ntnumba_version=np.array(__version__),
                        params=np.array(json.dumps(params)), n_iter_=np.array(model.n_iter_),
                        n_features_in_=np.array(model.n_features_in_),
                        scale_=np.array(float(model.scale_)), **payload)
    return path


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
        The file is truncated, not an ntnumba model, or of a newer format version.

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
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {k: f[k] for k in f.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise ValueError(f"path: {path} is not a readable ntnumba model file "
                         f"(truncated or not an .npz archive: {exc})") from None
    if "format" not in data or str(data["format"]) != FORMAT:
        raise ValueError(f"path: {path} is not an ntnumba model file (no '{FORMAT}' marker)")
    version = int(data["format_version"])
    if version > FORMAT_VERSION:
        raise ValueError(f"path: {path} has model format version {version}, newer than this "
                         f"ntnumba reads ({FORMAT_VERSION}); upgrade ntnumba")
    missing = [k for k in _ARRAYS + ("params", "n_iter_", "n_features_in_", "scale_")
               if k not in data]
    if missing:
        raise ValueError(f"path: {path} is missing {missing}: truncated or corrupted model file")
    model = NTClustering(**json.loads(str(data["params"])))
    for name in _ARRAYS:
        setattr(model, name, data[name])
    model.n_iter_ = int(data["n_iter_"])
    model.n_features_in_ = int(data["n_features_in_"])
    model.scale_ = float(data["scale_"])
    N = model.n_features_in_
    model._p = model._params(N)
    A = model.components_
    model._state = _driver.State(
        A=A if model._p.learn_transform else None, tau=model.dissimilarity_,
        nu=model.similarity_, labels=model.labels_, similarity_labels=model.similarity_labels_,
        objective_history=list(model.objective_history_), n_iter=model.n_iter_)
    model._rng_state = np.random.RandomState(0).get_state()
    return model

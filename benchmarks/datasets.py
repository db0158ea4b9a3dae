"""Loaders of the benchmark data sets of the data folder (``../shared/data``, ``NTNUMBA_DATA``).

They rebuild the inputs of the NT clustering paper (Kostadinov et al. 2019, Sec. 5: COIL-20, ORL
and Extended Yale B "downscaled to resolutions 20x25, 24x24 and 21x21 and normalized to unit
variance") and of the development suite (USPS, ISOLET, an MNIST subset) from public copies of the
data sets (see ``docs/datasets.md``). They serve the reproduction and the development suite;
users of the library have :func:`ntnumba.datasets.load_demo` (COIL-20 shipped in the package) and
:func:`ntnumba.datasets.load_file` for their own files.

- :func:`load_coil20`: ``"paper"`` = 20x25 (1440 x 500), area-averaged from the 32x32 images;
  also ``"32x32"`` (as stored) or any ``"HxW"`` / ``(h, w)``.
- :func:`load_orl`: ``"paper"`` = 24x24 (400 x 576), from the 112x92 originals; also ``"32x32"``
  (the usual ``ORL_32x32.mat`` crop), ``"112x92"`` or any size.
- :func:`load_yaleb`: ``"paper"`` = 21x21 (2414 x 441), from the 192x168 cropped originals minus
  the 18 ``is_bad`` images; also ``"32x32"`` (``YaleB_32x32.mat``), ``"48x42"`` or any size.
- :func:`load_usps`, :func:`load_isolet`, :func:`load_mnist_subset`: the held-out sets.

Every loader returns ``(X, y)``: ``X`` float64 of shape (n_samples, h * w), each row one image
flattened in C (row-major) order, so ``X[i].reshape(h, w)`` is the upright image; ``y`` int64
labels 0 .. n_classes - 1. Samples are in file order, i.e. sorted by class: shuffle before any
online/minibatch run. Resampling and normalisation: :func:`ntnumba.datasets.resize_images`
(area averaging) and :func:`ntnumba.datasets.normalize_images`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
from scipy.io import loadmat

from ntnumba.datasets import normalize_images, resize_images

__all__ = ["load_coil20", "load_orl", "load_yaleb", "load_usps", "load_isolet",
           "load_mnist_subset", "get_data_home", "DATA_ENV_VAR"]

#: Environment variable naming the data folder (the one holding ``coil20/``, ``orl/``, ``yaleb/``).
DATA_ENV_VAR = "NTNUMBA_DATA"

_REPO_ROOT = Path(__file__).resolve().parents[1]

_COIL_MAT = ("coil20", "COIL20_32x32.mat")
_ORL_MAT = ("orl", "ORL_32x32.mat")
_ORL_NPZ = ("orl", "ORL_112x92.npz")
_YALE_MAT = ("yaleb", "YaleB_32x32.mat")
_YALE_NPZ = ("yaleb", "CroppedYale_192x168.npz")
_USPS_MAT = ("usps", "USPS_1854_16x16.mat")
_ISOLET_MAT = ("isolet", "Isolet_1560.mat")
_MNIST_MAT = ("mnist", "MNIST_subset604.mat")


# ----------------------------------------------------------------------------------------------
# Locating the data folder
# ----------------------------------------------------------------------------------------------
def _candidate_homes(data_home):
    """Folders to search, in order, and a phrase saying where they came from."""
    if data_home is not None:
        return [Path(os.path.abspath(os.fspath(data_home)))], "the data_home argument"
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        return [Path(os.path.abspath(env))], f"the environment variable {DATA_ENV_VAR}"
    homes = [
        Path(os.path.abspath(Path.cwd() / ".." / "shared" / "data")),
        Path(os.path.abspath(_REPO_ROOT / ".." / "shared" / "data")),
    ]
    unique = []
    for h in homes:
        if h not in unique:
            unique.append(h)
    return unique, "the default search (../shared/data from the working directory and the repo)"


def _how_to_set():
    return (
        f"Pass data_home='/path/to/data' or set the environment variable {DATA_ENV_VAR} to the "
        "folder that holds coil20/, orl/ and yaleb/ (a copy of the project's shared/data). "
        "COIL-20 is also shipped with the package: ntnumba.datasets.load_demo()."
    )


def get_data_home(data_home=None):
    """Return the folder the dataset loaders read from.

    Parameters
    ----------
    data_home : str or path-like, optional
        Folder holding ``coil20/``, ``orl/`` and ``yaleb/``. When None, the environment
        variable ``NTNUMBA_DATA`` is used; when that is unset, ``../shared/data`` relative to
        the current working directory, then relative to the repository root (the folder that
        contains ``benchmarks/``).

    Returns
    -------
    pathlib.Path
        The first of those candidates that is an existing folder (absolute path).

    Raises
    ------
    FileNotFoundError
        If no candidate folder exists; the message lists the paths tried.

    Examples
    --------
    >>> from benchmarks.datasets import get_data_home
    >>> (get_data_home() / "coil20").is_dir()
    True
    """
    homes, origin = _candidate_homes(data_home)
    for h in homes:
        if h.is_dir():
            return h
    tried = ", ".join(str(h) for h in homes)
    raise FileNotFoundError(f"No data folder found from {origin}; tried: {tried}. {_how_to_set()}")


def _find_file(parts, data_home, what):
    """Full path of ``<home>/<sub>/<name>`` (or ``<home>/<name>``) for the first matching home."""
    sub, name = parts
    homes, origin = _candidate_homes(data_home)
    tried = []
    for h in homes:
        for p in (h / sub / name, h / name):
            tried.append(p)
            if p.is_file():
                return p
    raise FileNotFoundError(
        f"{what}: data file {sub}/{name} not found (searched {origin}). Tried: "
        + ", ".join(str(p) for p in tried)
        + f". {_how_to_set()}"
    )


# ----------------------------------------------------------------------------------------------
# Resolution, resampling, labels
# ----------------------------------------------------------------------------------------------
_SIZE = re.compile(r"^(\d+)\s*[x×*,]\s*(\d+)$")


def _resolution(resolution, paper, native, what):
    """``resolution`` (``"paper"``, ``"original"``, ``"HxW"`` or ``(h, w)``) as an (h, w) pair."""
    if isinstance(resolution, str):
        key = resolution.strip().lower()
        named = {"paper": paper, "original": native, "native": native, "full": native}
        size = _SIZE.match(key)
        if key not in named and size is None:
            raise ValueError(
                f"{what}: unknown resolution {resolution!r}; use 'paper' ({paper[0]}x{paper[1]}), "
                f"'original' ({native[0]}x{native[1]}), a string 'HxW' such as '32x32', "
                "or a tuple (h, w)")
        resolution = named[key] if key in named else tuple(int(g) for g in size.groups())
    try:
        pair = tuple(int(s) for s in resolution)
        valid = len(pair) == 2 and min(pair) >= 1 and pair == tuple(resolution)
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(f"resolution must be a pair (h, w) of positive integers, got "
                         f"{resolution!r}")
    return pair


def _labels0(labels):
    """Labels 0 .. K-1 (int64) in the sorted order of the original labels."""
    return np.unique(np.asarray(labels).ravel(), return_inverse=True)[1].astype(np.int64).ravel()


def _finish(imgs, labels, shape, normalize, *, order="C"):
    """Images (a stack, or flat square rows in ``order``) resampled to ``shape``, normalised."""
    imgs = np.asarray(imgs)
    if imgs.ndim == 2:
        side = int(round(np.sqrt(imgs.shape[1])))
        imgs = imgs.reshape(len(imgs), side, side, order=order)
    X = resize_images(imgs, imgs.shape[1:], shape).reshape(len(imgs), -1)
    return (normalize_images(X, copy=False) if normalize else X), _labels0(labels)


# ----------------------------------------------------------------------------------------------
# The data sets
# ----------------------------------------------------------------------------------------------
def load_coil20(resolution="paper", *, data_home=None, normalize=True):
    """Load COIL-20 (Columbia Object Image Library): 20 objects x 72 poses = 1440 images.

    Parameters
    ----------
    resolution : str or tuple of int, default "paper"
        ``"paper"``: 20x25 (h x w) as in the paper, made from the 32x32 images by area
        averaging (:func:`resize_images`); note the aspect change (32x32 -> 20x25).
        ``"32x32"`` (also ``"original"``): the 32x32 images as stored. Any other ``"HxW"`` string
        or ``(h, w)`` tuple: area resampling of the 32x32 images.
    data_home : str or path-like, optional
        Folder holding ``coil20/COIL20_32x32.mat``; see :func:`get_data_home` for the search
        order (``NTNUMBA_DATA``, then ``../shared/data``).
    normalize : bool, default True
        Normalise every image to zero mean and unit variance (:func:`normalize_images`).
        If False, ``X`` holds grey levels in [0, 255] (resampled as float64).

    Returns
    -------
    X : ndarray of float64, shape (1440, h * w)
        One image per row, flattened in C order: ``X[i].reshape(h, w)`` is upright.
    y : ndarray of int64, shape (1440,)
        Object labels 0..19, 72 per object, sorted.

    Raises
    ------
    FileNotFoundError
        If the data file is not found; the message gives the paths tried.

    See Also
    --------
    ntnumba.datasets.load_demo : the same images from the copy shipped with the package (no data
        folder needed).

    Notes
    -----
    Source: ``COIL20_32x32.mat`` (``X`` uint8 1440 x 1024 in MATLAB column order, ``Y`` 1..20).
    Citation: S. A. Nene, S. K. Nayar, H. Murase, "Columbia Object Image Library (COIL-20)",
    Tech. Rep. CUCS-005-96, 1996.

    Examples
    --------
    >>> from benchmarks.datasets import load_coil20
    >>> X, y = load_coil20()
    >>> X.shape, int(y.max()) + 1
    ((1440, 500), 20)
    >>> load_coil20("32x32")[0].shape
    (1440, 1024)
    """
    shape = _resolution(resolution, (20, 25), (32, 32), "load_coil20")
    d = loadmat(_find_file(_COIL_MAT, data_home, "load_coil20"))
    return _finish(d["X"], d["Y"], shape, normalize, order="F")


def load_orl(resolution="paper", *, data_home=None, normalize=True):
    """Load the ORL (AT&T) face database: 40 subjects x 10 images = 400 images.

    Parameters
    ----------
    resolution : str or tuple of int, default "paper"
        ``"paper"``: 24x24 as in the paper, area-averaged (:func:`resize_images`) from the
        112x92 originals (aspect change 112x92 -> 24x24). ``"32x32"`` or ``(32, 32)``: the
        widely used 32x32 version (``ORL_32x32.mat``, a tighter face crop, *not* made from the
        originals here). ``"112x92"`` (also ``"original"``): the originals. Any other size:
        area resampling of the originals.
    data_home : str or path-like, optional
        Folder holding ``orl/``; see :func:`get_data_home`.
    normalize : bool, default True
        Normalise every image to zero mean and unit variance (:func:`normalize_images`);
        if False, grey levels in [0, 255].

    Returns
    -------
    X : ndarray of float64, shape (400, h * w)
        One image per row, flattened in C order.
    y : ndarray of int64, shape (400,)
        Subject labels 0..39, 10 per subject, sorted.

    Raises
    ------
    FileNotFoundError
        If the data file is not found; the message gives the paths tried.

    Notes
    -----
    Citation: AT&T Laboratories Cambridge / Olivetti Research Laboratory face database;
    F. Samaria, A. Harter, 1994.

    Examples
    --------
    >>> from benchmarks.datasets import load_orl
    >>> X, y = load_orl()
    >>> X.shape, int(y.max()) + 1
    ((400, 576), 40)
    """
    shape = _resolution(resolution, (24, 24), (112, 92), "load_orl")
    if shape == (32, 32):
        d = loadmat(_find_file(_ORL_MAT, data_home, "load_orl"))
        return _finish(d["fea"], d["gnd"], shape, normalize, order="F")
    with np.load(_find_file(_ORL_NPZ, data_home, "load_orl")) as d:
        images, labels = d["images"], d["labels"]
    return _finish(images, labels, shape, normalize)


def load_yaleb(resolution="paper", *, data_home=None, normalize=True):
    """Load the Extended Yale B face database (cropped): 38 subjects, 2414 images.

    The 18 nearly black images flagged ``is_bad`` in the source are excluded, giving the
    standard 2414-image set (59 to 64 images per subject).

    Parameters
    ----------
    resolution : str or tuple of int, default "paper"
        ``"paper"``: 21x21 as in the paper, area-averaged (:func:`resize_images`) from the
        192x168 cropped originals (aspect change). ``"48x42"``: the size common in subspace
        clustering work, 4x4 block averages of the originals. ``"32x32"`` or ``(32, 32)``: the
        widely used ``YaleB_32x32.mat`` (not made from the originals here). ``"192x168"`` (also
        ``"original"``): the originals. Any other size: area resampling of the originals.
    data_home : str or path-like, optional
        Folder holding ``yaleb/``; see :func:`get_data_home`.
    normalize : bool, default True
        Normalise every image to zero mean and unit variance (:func:`normalize_images`);
        if False, grey levels in [0, 255].

    Returns
    -------
    X : ndarray of float64, shape (2414, h * w)
        One image per row, flattened in C order.
    y : ndarray of int64, shape (2414,)
        Subject labels 0..37, sorted.

    Raises
    ------
    FileNotFoundError
        If the data file is not found; the message gives the paths tried.

    Notes
    -----
    Citation: A. Georghiades, P. Belhumeur, D. Kriegman, PAMI 2001; K.-C. Lee, J. Ho,
    D. Kriegman, PAMI 2005.

    Examples
    --------
    >>> from benchmarks.datasets import load_yaleb
    >>> X, y = load_yaleb()
    >>> X.shape, int(y.max()) + 1
    ((2414, 441), 38)
    """
    shape = _resolution(resolution, (21, 21), (192, 168), "load_yaleb")
    if shape == (32, 32):
        d = loadmat(_find_file(_YALE_MAT, data_home, "load_yaleb"))
        return _finish(d["fea"], d["gnd"], shape, normalize, order="F")
    with np.load(_find_file(_YALE_NPZ, data_home, "load_yaleb")) as d:
        good = ~d["is_bad"]
        images, labels = d["images"][good], d["labels"][good]
    return _finish(images, labels, shape, normalize)


def load_usps(*, data_home=None, normalize=True):
    """Load the USPS handwritten digits subset: 1854 images of 16x16, 10 unbalanced classes.

    Not in the paper; a held-out set for the defaults (141 to 310 images per digit).

    Parameters
    ----------
    data_home : str or path-like, optional
        Folder holding ``usps/USPS_1854_16x16.mat``; see :func:`get_data_home`.
    normalize : bool, default True
        Normalise every image to zero mean and unit variance (:func:`normalize_images`);
        if False, the stored grey levels in [-1, 1].

    Returns
    -------
    X : ndarray of float64, shape (1854, 256)
        One 16x16 image per row, C order.
    y : ndarray of int64, shape (1854,)
        The digit (0..9).

    Examples
    --------
    >>> from benchmarks.datasets import load_usps
    >>> X, y = load_usps()
    >>> X.shape, int(y.max()) + 1
    ((1854, 256), 10)
    """
    d = loadmat(_find_file(_USPS_MAT, data_home, "load_usps"))
    return _finish(d["X"], d["Y"], (16, 16), normalize)


def load_isolet(*, data_home=None):
    """Load the ISOLET subset: 1560 spoken letters x 617 features, 26 classes x 60.

    Not images: the features are returned as stored (UCI's scaling to [-1, 1]). Not in the
    paper; a held-out set for the defaults.

    Parameters
    ----------
    data_home : str or path-like, optional
        Folder holding ``isolet/Isolet_1560.mat``; see :func:`get_data_home`.

    Returns
    -------
    X : ndarray of float64, shape (1560, 617)
    y : ndarray of int64, shape (1560,)
        The letter (0..25).

    Examples
    --------
    >>> from benchmarks.datasets import load_isolet
    >>> X, y = load_isolet()
    >>> X.shape, int(y.max()) + 1
    ((1560, 617), 26)
    """
    d = loadmat(_find_file(_ISOLET_MAT, data_home, "load_isolet"))
    return np.asarray(d["X"], dtype=np.float64), _labels0(d["Y"])


def load_mnist_subset(*, data_home=None, normalize=True):
    """Load the 604-image MNIST subset (28x28, 10 digits, 54 to 69 each).

    Parameters
    ----------
    data_home : str or path-like, optional
        Folder holding ``mnist/MNIST_subset604.mat``; see :func:`get_data_home`.
    normalize : bool, default True
        Normalise every image to zero mean and unit variance (:func:`normalize_images`);
        if False, grey levels in [0, 255].

    Returns
    -------
    X : ndarray of float64, shape (604, 784)
        One 28x28 image per row, C order.
    y : ndarray of int64, shape (604,)
        The digit (0..9).

    Examples
    --------
    >>> from benchmarks.datasets import load_mnist_subset
    >>> X, y = load_mnist_subset()
    >>> X.shape, int(y.max()) + 1
    ((604, 784), 10)
    """
    d = loadmat(_find_file(_MNIST_MAT, data_home, "load_mnist_subset"))
    return _finish(np.asarray(d["X"]).T, d["gnd"], (28, 28), normalize)

"""The COIL-20 copy shipped with the package, a generic array-file loader, resampling and
normalisation of images.

- :func:`load_demo`: COIL-20 at 32x32 from the copy shipped in the package (no data folder);
  ``"paper"`` gives the 20x25 images of the NT clustering paper (Kostadinov et al. 2019).
- :func:`load_file`: any .mat/.npz/.npy matrix or image stack, a .csv/.tsv/.txt table (also
  compressed: .csv.gz, .bz2, .xz, .zip) or a .parquet table.
- :func:`resize_images` (area averaging) and :func:`normalize_images` (zero mean, unit variance
  per image).

The loaders return ``(X, y)``: ``X`` float64 of shape (n_samples, n_features), images flattened
in C (row-major) order, so ``X[i].reshape(h, w)`` is the upright image. The loaders of the
paper's benchmark data sets (COIL-20, ORL, Extended Yale B from a data folder) are in
``benchmarks/datasets.py`` of the repository, outside the package.
"""
from __future__ import annotations

import bz2
import contextlib
import csv
import gzip
import io
import lzma
import os
import re
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["load_demo", "load_file", "normalize_images", "resize_images"]

_PACKAGE_DIR = Path(__file__).resolve().parent
_DEMO_FILE = _PACKAGE_DIR / "data" / "coil20_32x32.npz"

_DATA_KEYS = ("X", "fea", "images", "data")
_TARGET_KEYS = ("Y", "gnd", "labels", "y", "target")
_TABLES = (".csv", ".tsv", ".txt")
_PARQUET = (".parquet", ".pq")
_EXTENSIONS = (".mat", ".npz", ".npy") + _TABLES + _PARQUET
#: Compressed tables (``iris.csv.gz``): the compression, by the last extension (pandas reads
#: them; their first lines are sampled through the standard library's modules).
_COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zip": "zip"}


# ----------------------------------------------------------------------------------------------
# Resampling and normalisation
# ----------------------------------------------------------------------------------------------
def _area_matrix(n_in, n_out):
    """(n_out, n_in) area-averaging weights; rows sum to 1. Coordinates scaled by n_out make the
    overlaps exact integers: input pixel j covers [j n_out, (j+1) n_out), output i [i n_in, ...)."""
    i = np.arange(n_out)[:, None]
    j = np.arange(n_in)[None, :]
    lo = np.maximum(i * n_in, j * n_out)
    hi = np.minimum((i + 1) * n_in, (j + 1) * n_out)
    return np.clip(hi - lo, 0, None).astype(np.float64) / n_in


def _check_shape(shape, name):
    try:
        h, w = (int(s) for s in shape)
        ok = len(tuple(shape)) == 2 and all(int(s) == s for s in shape)
    except (TypeError, ValueError):
        ok = False
    if not ok or h < 1 or w < 1:
        raise ValueError(f"{name} must be a pair (h, w) of positive integers, got {shape!r}")
    return h, w


def resize_images(X, image_shape, output_shape, *, order="C", chunk_size=256):
    """Resample a stack of grey-level images by area averaging.

    Each output pixel is the average of the input image over the output pixel's footprint,
    input pixels that are cut by the footprint's border counting with their overlapping
    fraction (a separable box filter; for downscaling the same as OpenCV ``INTER_AREA`` and
    PIL ``Image.BOX``). With integer factors this is plain block averaging (e.g. 192x168 ->
    48x42 averages 4x4 blocks). Each axis is scaled independently, so the aspect ratio may
    change (COIL-20 32x32 -> 20x25 squeezes the height by 1.6 and the width by 1.28). Upscaling
    gives piecewise-constant images. The mean grey level of every image is preserved.

    Parameters
    ----------
    X : array-like, shape (n_samples, h * w) or (n_samples, h, w)
        The images; flat rows are read as images with ``order``.
    image_shape : tuple of int (h, w)
        Shape of one input image. For a 3-D ``X`` it must equal ``X.shape[1:]``.
    output_shape : tuple of int (h_out, w_out)
        Shape of one output image.
    order : {"C", "F"}, default "C"
        How a flat input row is an image (``"F"``: MATLAB column order). Ignored for 3-D input.
    chunk_size : int, default 256
        Images processed per block (bounds the float64 working memory).

    Returns
    -------
    ndarray of float64
        Shape (n_samples, h_out * w_out) with rows in C order for 2-D input,
        (n_samples, h_out, w_out) for 3-D input.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.datasets import resize_images
    >>> img = np.arange(16.0).reshape(1, 4, 4)
    >>> resize_images(img, (4, 4), (2, 2))
    array([[[ 2.5,  4.5],
            [10.5, 12.5]]])
    """
    X = np.asarray(X)
    h, w = _check_shape(image_shape, "image_shape")
    ho, wo = _check_shape(output_shape, "output_shape")
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    if X.ndim == 3:
        if X.shape[1:] != (h, w):
            raise ValueError(
                f"image_shape {(h, w)} does not match the image stack's shape {X.shape[1:]}"
            )
        imgs, flat = X, False
    elif X.ndim == 2:
        if X.shape[1] != h * w:
            raise ValueError(
                f"image_shape {(h, w)} has {h * w} pixels but X has n_features={X.shape[1]}"
            )
        imgs, flat = X.reshape(X.shape[0], h, w, order=order), True
    else:
        raise ValueError(f"X must be 2-D (n, h*w) or 3-D (n, h, w), got shape {X.shape}")
    n = imgs.shape[0]
    out = np.empty((n, ho, wo), dtype=np.float64)
    if (ho, wo) == (h, w):
        out[...] = imgs
    else:
        Rh = _area_matrix(h, ho)
        RwT = _area_matrix(w, wo).T
        step = max(int(chunk_size), 1)
        for s in range(0, n, step):
            block = imgs[s:s + step].astype(np.float64)
            m = block.shape[0]
            # two plain GEMMs (one per axis) rather than a stack of small matrix products
            tmp = (block.reshape(m * h, w) @ RwT).reshape(m, h, wo)
            tmp = np.ascontiguousarray(tmp.transpose(1, 0, 2)).reshape(h, m * wo)
            out[s:s + step] = (Rh @ tmp).reshape(ho, m, wo).transpose(1, 0, 2)
    return out.reshape(n, ho * wo) if flat else out


def normalize_images(X, *, copy=True):
    """Normalise every row (image) to zero mean and unit variance.

    This is the paper's per-image normalisation ("normalized to unit variance"), with the mean
    removed as well. The variance is the population variance (``ddof=0``), so every row of the
    result has ``mean == 0`` and ``std == 1`` exactly up to rounding. A row of zero variance
    (a constant image; also a row whose standard deviation is below ``1e-12`` times its largest
    absolute value, i.e. constant up to rounding) cannot be scaled: it becomes all zeros rather
    than dividing by zero.

    Parameters
    ----------
    X : array-like, shape (n_samples, n_features)
        Data, one image per row.
    copy : bool, default True
        If False and ``X`` is already a float64 ndarray, normalise it in place.

    Returns
    -------
    ndarray of float64, shape (n_samples, n_features)

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.datasets import normalize_images
    >>> normalize_images(np.array([[1.0, 3.0], [5.0, 5.0]]))
    array([[-1.,  1.],
           [ 0.,  0.]])
    """
    if copy or not (isinstance(X, np.ndarray) and X.dtype == np.float64):
        X = np.array(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    scale = np.max(np.abs(X), axis=1) if X.shape[1] else np.zeros(X.shape[0])
    X -= X.mean(axis=1, keepdims=True)
    std = np.sqrt(np.mean(X * X, axis=1))
    degenerate = std <= 1e-12 * scale
    std[degenerate] = 1.0
    X /= std[:, None]
    X[degenerate] = 0.0
    return X


# ----------------------------------------------------------------------------------------------
# The demo set
# ----------------------------------------------------------------------------------------------
_SIZE_RE = re.compile(r"^\s*(\d+)\s*[x×X*,]\s*(\d+)\s*$")


def _parse_resolution(resolution, paper, native, what):
    """Turn ``resolution`` (string or (h, w)) into an (h, w) tuple."""
    if isinstance(resolution, str):
        key = resolution.strip().lower()
        if key == "paper":
            return paper
        if key in ("original", "native", "full"):
            return native
        m = _SIZE_RE.match(key)
        if m:
            return _check_shape((int(m.group(1)), int(m.group(2))), "resolution")
        raise ValueError(
            f"{what}: unknown resolution {resolution!r}; use 'paper' ({paper[0]}x{paper[1]}), "
            f"'original' ({native[0]}x{native[1]}), a string 'HxW' such as '32x32', "
            "or a tuple (h, w)"
        )
    return _check_shape(resolution, "resolution")


def load_demo(resolution="32x32", *, normalize=True):
    """Load the copy of COIL-20 at 32x32 shipped inside the package (no data folder needed).

    The images are those of ``COIL20_32x32.mat`` (``ntnumba/data/coil20_32x32.npz``, uint8,
    876 kB; citation in ``ntnumba/data/CITATION.txt``), so ``load_demo(r)`` equals the
    repository's benchmark loader ``benchmarks.datasets.load_coil20(r)`` for every resolution
    ``r``.

    Parameters
    ----------
    resolution : str or tuple of int, default "32x32"
        ``"32x32"``: as stored; ``"paper"``: 20x25 by area averaging; any ``"HxW"`` or (h, w).
    normalize : bool, default True
        Normalise every image to zero mean and unit variance (:func:`normalize_images`).

    Returns
    -------
    X : ndarray of float64, shape (1440, h * w)
        One image per row, flattened in C order.
    y : ndarray of int64, shape (1440,)
        Object labels 0..19, 72 per object, sorted.

    Notes
    -----
    Citation: S. A. Nene, S. K. Nayar, H. Murase, "Columbia Object Image Library (COIL-20)",
    Tech. Rep. CUCS-005-96, 1996.

    Examples
    --------
    >>> from ntnumba.datasets import load_demo
    >>> X, y = load_demo()
    >>> X.shape, y.shape, int(y.max()) + 1
    ((1440, 1024), (1440,), 20)
    >>> round(float(X[0].std()), 6)
    1.0
    """
    shape = _parse_resolution(resolution, (20, 25), (32, 32), "load_demo")
    with np.load(_DEMO_FILE) as d:
        images, labels = d["images"], d["labels"]
    X = resize_images(images, images.shape[1:], shape).reshape(len(images), -1)
    if normalize:
        normalize_images(X, copy=False)
    return X, labels.astype(np.int64) - 1     # stored 1..20


# ----------------------------------------------------------------------------------------------
# Generic files
# ----------------------------------------------------------------------------------------------
def _is_numeric(a):
    """A numeric or boolean ndarray (booleans are read as 0/1, as the estimator does)."""
    return isinstance(a, np.ndarray) and a.dtype != object and (
        np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_
    )


@contextlib.contextmanager
def _damaged(path, kind):
    """Any error of a reader of a damaged file as a ValueError naming the file (a missing or
    unreadable file, and MATLAB v7.3, as themselves)."""
    try:
        yield
    except (FileNotFoundError, PermissionError, IsADirectoryError, NotImplementedError):
        raise
    except Exception as exc:  # noqa: BLE001 - scipy/numpy raise many kinds on damaged files
        raise ValueError(f"{path}: not a readable {kind} (truncated or corrupted: "
                         f"{type(exc).__name__}: {exc}); write the file again") from None


def _loadmat(path):
    from scipy.io import loadmat

    return loadmat(path)


def _read_mapping(path, ext):
    """{name: ndarray} for .mat / .npz files (unreadable entries skipped)."""
    if ext == ".mat":
        try:
            with _damaged(path, "MATLAB .mat file"):
                raw = _loadmat(path)
        except NotImplementedError as exc:  # MATLAB v7.3 = HDF5
            raise ValueError(
                f"{path}: MATLAB v7.3 (HDF5) files are not supported by scipy.io.loadmat; "
                "re-save with save(..., '-v7') or read it with h5py"
            ) from exc
        return {k: v for k, v in raw.items() if not k.startswith("__")}
    out = {}
    with _damaged(path, ".npz archive"), np.load(path, allow_pickle=False) as z:
        for k in z.files:
            try:
                out[k] = z[k]
            except ValueError as exc:  # object arrays need pickle: not data for us
                if "pickle" not in str(exc):
                    raise
    return out


def _read_sparse(path):
    """The matrix of a ``scipy.sparse.save_npz`` file as CSR float64 (None: other arrays)."""
    with _damaged(path, ".npz archive"), np.load(path, allow_pickle=False) as z:
        if not {"format", "shape", "data"} <= set(z.files):
            return None
    from scipy import sparse
    with _damaged(path, "scipy.sparse .npz matrix"):
        return sparse.load_npz(path).tocsr().astype(np.float64)


def _pick_target(arrays, target_key):
    if target_key is False:
        return None
    if target_key is not None:
        if target_key not in arrays:
            raise ValueError(
                f"target_key {target_key!r} not found; available keys: {sorted(arrays)}"
            )
        return target_key
    for k in _TARGET_KEYS:
        if k in arrays and isinstance(arrays[k], np.ndarray) and arrays[k].dtype != object:
            return k
    return None


def _pick_data(arrays, data_key, exclude):
    if data_key is not None:
        if data_key not in arrays:
            raise ValueError(f"data_key {data_key!r} not found; available keys: {sorted(arrays)}")
        a = arrays[data_key]
        if not _is_numeric(a) or a.ndim not in (2, 3):
            raise ValueError(
                f"data_key {data_key!r} must name a 2-D or 3-D numeric array, got "
                f"dtype {getattr(a, 'dtype', type(a))} shape {getattr(a, 'shape', None)}"
            )
        return data_key
    cands = {
        k: a for k, a in arrays.items() if k != exclude and _is_numeric(a) and a.ndim in (2, 3)
    }
    for k in _DATA_KEYS:
        if k in cands:
            return k
    if not cands:
        raise ValueError(
            f"no 2-D or 3-D numeric array found for the data; available keys: {sorted(arrays)}"
        )
    ranked = sorted(cands, key=lambda k: cands[k].size, reverse=True)
    if len(ranked) > 1 and cands[ranked[0]].size == cands[ranked[1]].size:
        raise ValueError(
            f"cannot choose the data array: {ranked[0]!r} and {ranked[1]!r} have the same size; "
            f"pass data_key (available keys: {sorted(arrays)})"
        )
    return ranked[0]


#: Column names taken as the labels of a CSV file with a header (case-insensitive), in order.
_CSV_TARGET_NAMES = ("target", "label", "labels", "class", "y", "gnd")
#: Delimiters tried, in order, when ``delimiter`` is not given (then whitespace).
_DELIMITERS = ("\t", ";", ",", "|")
_SAMPLE_LINES = 200


#: Fields pandas reads as missing values (its default ``na_values``): neither text nor numbers
#: when the header is detected.
_MISSING = frozenset(("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                      "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a",
                      "nan", "null"))


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_text(cell):
    return cell not in _MISSING and not _is_number(cell)


def _header_by_types(cells, body, delimiter):
    """Whether the first line ``cells`` is a header, by types (as ``csv.Sniffer.has_header``
    compares them), and why: ``(True, reason)`` when one of its fields is text above a column
    whose sampled fields below are all numbers; a first line of the same types as the lines
    below it (numbers, and text in a text column such as the labels of a headerless iris.csv)
    is data. Without a numeric column below (or without lines below) the types cannot tell:
    then a text field makes it a header."""
    rows = [_split(line, delimiter) for line in body]

    def number(v):   # a decimal comma counts unless the comma is the delimiter
        return _is_number(v) or (delimiter != "," and _is_number(v.replace(",", ".", 1)))
    numeric = []
    for j in range(len(cells)):
        column = [r[j] for r in rows if j < len(r) and r[j] not in _MISSING]
        if column and all(number(v) for v in column):
            numeric.append(j)
    for j in numeric:
        if _is_text(cells[j]):
            return True, f"detected: text {cells[j]!r} above numbers"
    if numeric:
        return False, "detected: the first line has the types of the lines below"
    if any(_is_text(c) for c in cells):
        return True, "detected: text in the first line, no column of numbers below"
    return False, "detected: the first line holds numbers"


@contextlib.contextmanager
def _open_text(path, compression=None):
    """The text of a file, decompressed (``compression``: None or a value of
    ``_COMPRESSIONS``; a zip archive must hold one file, as pandas requires)."""
    if compression == "zip":
        with zipfile.ZipFile(path) as z:
            members = [m for m in z.infolist() if not m.is_dir()]
            if len(members) != 1:
                raise ValueError(f"{path}: a zip archive of a table must hold exactly one file, "
                                 f"it holds {len(members)}")
            with io.TextIOWrapper(z.open(members[0]), encoding="utf-8-sig", newline="") as f:
                yield f
        return
    opener = {None: open, "gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}[compression]
    with opener(path, "rt", newline="", encoding="utf-8-sig") as f:
        yield f


def csv_sample(path, limit=_SAMPLE_LINES, compression=None):
    """The first non-empty lines of a text file (at most ``limit``; None: all of them)."""
    lines = []
    try:
        with _open_text(path, compression) as f:
            for line in f:
                if line.strip():
                    lines.append(line.rstrip("\r\n"))
                    if len(lines) == limit:
                        break
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except (OSError, EOFError, lzma.LZMAError, zipfile.BadZipFile) as exc:
        if compression is None:
            raise
        raise ValueError(f"{path}: not a readable {compression}-compressed file "
                         f"({type(exc).__name__}: {exc})") from None
    return lines


def _file_kind(path):
    """``(extension, compression)`` of a data file: ``iris.csv.gz`` -> ``(".csv", "gzip")``;
    ValueError for an extension no reader takes."""
    suffixes = [x.lower() for x in path.suffixes]
    ext = suffixes[-1] if suffixes else ""
    if ext in _COMPRESSIONS and len(suffixes) > 1 and suffixes[-2] in _TABLES:
        return suffixes[-2], _COMPRESSIONS[ext]
    if ext not in _EXTENSIONS:
        compressed = ", ".join(f"{t}{c}" for t in _TABLES[:1] for c in _COMPRESSIONS)
        raise ValueError(
            f"unknown file extension {path.suffix!r} for {path}; supported: "
            f"{', '.join(_EXTENSIONS)}, and compressed tables ({compressed}, ...)")
    return ext, None


def sniff_delimiter(lines):
    """The delimiter: the first of tab, ';', ',', '|' that splits every sampled line (the header
    line included) into the same number (> 1) of fields, else whitespace when that does, else
    ',' (one column)."""
    for d in _DELIMITERS + ("whitespace",):
        widths = {len(_split(line, d)) for line in lines}
        if len(widths) == 1 and widths.pop() > 1:
            return d
    return ","


def _split(line, delimiter):
    """The fields of one line (quotes as in the csv module)."""
    if delimiter == "whitespace":
        row = next(csv.reader([line.strip()], delimiter=" ", skipinitialspace=True), [])
    else:
        row = next(csv.reader([line], delimiter=delimiter, skipinitialspace=True), [])
    return [c.strip() for c in row]


def _pick_csv_column(names, key, what):
    """Position of the column ``key`` (a name, or an int position, negative from the end)."""
    n = len(names)
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if not -n <= key < n:
            raise ValueError(f"{what} {key} is out of range: the file has {n} columns "
                             f"(positions 0..{n - 1}, or -1 for the last)")
        return int(key) % n
    if key == "last":
        return n - 1
    if isinstance(key, str):
        if key in names:
            return names.index(key)
        folded = [i for i, c in enumerate(names) if str(c).lower() == key.lower()]
        if len(folded) == 1:
            return folded[0]
    shown = ", ".join(repr(c) for c in names[:12]) + (", ..." if n > 12 else "")
    hint = "" if any(isinstance(c, str) for c in names) else " (the file has no header row)"
    raise ValueError(f"{what} {key!r} not found{hint}; pass a column name, a position "
                     f"(0..{n - 1}, -1 = last) or 'last'; columns: {shown}")


def _pandas():
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - pandas is a dependency
        raise ImportError("reading tables needs pandas: pip install pandas") from exc
    return pd


def _read_parquet(path):
    """A parquet file as ``(DataFrame, column names, info)`` (pandas with pyarrow)."""
    pd = _pandas()
    try:
        df = pd.read_parquet(path)
    except ImportError as exc:
        raise ImportError(f"{path}: reading parquet files needs pyarrow: pip install "
                          f"'ntnumba[parquet]' (or pyarrow) ({exc})") from None
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except (OSError, ValueError, TypeError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path}: not a readable parquet file ({msg})") from None
    names = [str(c) for c in df.columns]
    info = {"format": "parquet", "header": True, "header_reason": None, "dropped": []}
    if list(df.index.names) != [None] or not df.index.equals(pd.RangeIndex(len(df))):
        shown = ", ".join(repr(str(n)) for n in df.index.names if n is not None) or "(unnamed)"
        info["dropped"].append(f"the file's index {shown} (pandas index, not a column)")
    return df.reset_index(drop=True), names, info


def _read_table(path, *, compression, target_key, delimiter, header, index_col):
    """Read a table (delimited text, maybe compressed, or parquet) with pandas; returns
    ``(X, y, info)``."""
    if compression == "parquet":
        if delimiter is not None or header not in (None, "auto", True):
            raise ValueError(f"{path}: delimiter and header are options of text tables; a "
                             "parquet file has its columns and names")
        df, names, info = _read_parquet(path)
    else:
        df, names, info = _read_delimited(path, compression, delimiter, header)
    X, y, columns = _table_columns(path, df, names, info["header"], target_key, index_col)
    dropped = info["dropped"] + columns.pop("dropped")
    info.update(columns, dropped=dropped)
    return X, y, info


def _read_delimited(path, compression, delimiter, header):
    """A delimited text table as ``(DataFrame, column names or positions, info)``: its
    delimiter, header and decimal separator detected unless given."""
    pd = _pandas()
    lines = csv_sample(path, compression=compression)
    if not lines:
        raise ValueError(f"{path}: the file is empty")
    if delimiter is None:
        delimiter = sniff_delimiter(lines)
        sniffed = True
    else:
        if not isinstance(delimiter, str) or not delimiter:
            raise ValueError(f"delimiter: expected a character such as ',', ';', '\\t' or "
                             f"'whitespace', got {delimiter!r}")
        delimiter = {"tab": "\t", "\\t": "\t", "space": "whitespace"}.get(delimiter, delimiter)
        sniffed = False
    first = lines[0]
    commented = first.startswith("#")        # numpy.savetxt writes its header as '# a,b,c'
    if commented:
        first = first.lstrip("#").lstrip()
    cells = _split(first, delimiter)
    if header in (None, "auto"):
        if commented:   # a comment line is never data: names when it holds text
            header = any(_is_text(c) for c in cells)
            header_reason = ("detected: a '#' line of names" if header else
                             "its first line, '#' and numbers, skipped")
        else:
            header, header_reason = _header_by_types(cells, lines[1:], delimiter)
    elif isinstance(header, (bool, np.bool_)):
        header_reason = "as asked"
    else:
        raise ValueError(f"header: expected 'auto', True or False, got {header!r}")
    body = lines[1:] if header else lines
    decimal = "." if delimiter != ";" or not any(
        re.search(r"\d,\d", line) for line in body) else ","
    kw = dict(header=None, skip_blank_lines=True, decimal=decimal, compression=compression,
              skiprows=1 if (header or commented) else 0, comment=None)
    if delimiter == "whitespace":
        kw.update(sep=r"\s+", engine="python")
    else:
        kw.update(sep=delimiter, skipinitialspace=True)
    try:
        df = pd.read_csv(path, **kw)
    except (OSError, EOFError, lzma.LZMAError, zipfile.BadZipFile) as exc:
        if compression is None:
            raise
        raise ValueError(f"{path}: not a readable {compression}-compressed file "
                         f"({type(exc).__name__}: {exc})") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        shown = "whitespace" if delimiter == "whitespace" else repr(delimiter)
        raise ValueError(f"{path}: not a table with delimiter {shown} ({msg}); pass the "
                         "delimiter (delimiter=..., --delimiter)") from None
    if header:
        if len(cells) != df.shape[1]:
            raise ValueError(f"{path}: the header row has {len(cells)} names but the rows "
                             f"have {df.shape[1]} fields")
        names = list(cells)
    else:
        names = list(range(df.shape[1]))
    info = {"format": "text" if compression is None else f"text, {compression}-compressed",
            "delimiter": "whitespace" if delimiter == "whitespace" else delimiter,
            "delimiter_sniffed": sniffed, "header": bool(header),
            "header_reason": header_reason, "decimal": decimal, "dropped": []}
    return df, names, info


def _non_numeric(frame):
    """``[(position, a value that is not a number)]`` of the columns of the DataFrame ``frame``
    that do not convert to float64 (text, categories of text, dates ...)."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype
    bad = []
    for i in range(frame.shape[1]):
        col = frame.iloc[:, i]
        if is_numeric_dtype(col) or is_bool_dtype(col):
            continue
        try:
            col.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            bad.append((i, next((v for v in col if not _is_float(v)), None)))
    return bad


def _is_float(value):
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _text_column_error(where, names, bad, fix):
    """The ValueError refusing the columns ``bad`` (of :func:`_non_numeric`, ``names`` their
    names): the first one, one of its values, the others, and ``fix(name)`` of the first."""
    i, value = bad[0]
    others = ", ".join(repr(names[j]) for j, _ in bad[1:6]) + (", ..." if len(bad) > 6 else "")
    more = f"; {len(bad) - 1} more such column(s): {others}" if len(bad) > 1 else ""
    return ValueError(f"{where}column {names[i]!r} is not numeric (e.g. {value!r}{more}). "
                      f"{fix(names[i])}")


def non_numeric_frame_error(X, name="X"):
    """For a pandas DataFrame ``X`` with columns that are not numbers, the ValueError naming
    the first such column and the fixes; None for anything else (the caller's message
    stands)."""
    if not (hasattr(X, "iloc") and hasattr(X, "columns") and getattr(X, "ndim", 0) == 2):
        return None
    bad = _non_numeric(X)
    if not bad:
        return None
    return _text_column_error(f"{name}: ", list(X.columns), bad, lambda k: (
        f"Drop it ({name}.drop(columns=[{k!r}])), encode it as numbers "
        f"(pandas.get_dummies({name}, columns=[{k!r}]) or sklearn's OneHotEncoder), or, if it "
        f"holds the labels, take it out of {name}: it is the target of an evaluation "
        f"(ntnumba.metrics.evaluate({name}[{k!r}], model.labels_)), not a feature"))


def _table_columns(path, df, names, header, target_key, index_col):
    """The features, the labels and what was dropped of a table ``df`` whose columns are
    ``names`` (names when ``header``, else positions): ``(X, y, info)``."""
    pd = _pandas()
    drop = []
    index_name = index_reason = None
    if index_col is None:         # pandas' to_csv(): an unnamed first column of 0, 1, 2, ...
        if header and names and names[0] == "" and df.shape[1] > 1:
            drop.append(0)
            index_reason = "an unnamed first column, as pandas' to_csv writes the index"
    elif index_col is not False:
        drop.append(_pick_csv_column(names, index_col, "index_col"))
        index_reason = "as asked"
    if drop:
        index_name = "(unnamed)" if names[drop[0]] == "" else (
            repr(names[drop[0]]) if header else str(names[drop[0]]))
    label_pos = None
    if target_key is None:
        if header:
            found = [i for i, c in enumerate(names)
                     if i not in drop and str(c).lower() in _CSV_TARGET_NAMES]
            if len(found) > 1:
                raise ValueError(f"{path}: several columns look like labels "
                                 f"({', '.join(repr(names[i]) for i in found)}); choose one "
                                 "with target_key (--target-key NAME) or target_key=False")
            if found:
                label_pos = found[0]
    elif target_key is not False:
        label_pos = _pick_csv_column(names, target_key, "target_key")
        if label_pos in drop:
            raise ValueError(f"target_key and index_col both name column {names[label_pos]!r}")
    keep = [i for i in range(df.shape[1]) if i not in drop and i != label_pos]
    if not keep:
        raise ValueError(f"{path}: no feature columns left (the file has {df.shape[1]} columns)")
    data = df.iloc[:, keep]
    bad = _non_numeric(data)
    if bad:
        raise _text_column_error(f"{path}: ", [names[i] for i in keep], bad, lambda k: (
            f"If it holds the labels, pass target_key={k!r} (--target-key {k}); to drop it (an "
            f"index or id), index_col={k!r} (--index-col {k}); otherwise encode it as numbers "
            "(e.g. pandas.get_dummies or sklearn's OrdinalEncoder) and save the table again"))
    X = data.to_numpy(dtype=np.float64, na_value=np.nan)
    y = None
    if label_pos is not None:
        col = df.iloc[:, label_pos]
        y = col.to_numpy() if pd.api.types.is_numeric_dtype(col) else \
            col.astype(str).to_numpy().astype(str)
    label_name = names[label_pos] if label_pos is not None else None
    info = {"index_column": index_name, "index_reason": index_reason, "dropped": [],
            "feature_names": [str(names[i]) for i in keep] if header else None,
            "label_source": None if label_pos is None else (
                f"column {label_name!r}" if header else f"column {label_pos}")}
    return X, y, info


def _describe(info, n, N, y):
    """'150 samples x 4 features, labels from column 'target' (3 classes)' (+ how it was read)."""
    text = f"{n} samples x {N} features, "
    if y is None:
        text += "no labels"
    else:
        text += f"labels from {info['label_source']} ({np.unique(y).size} classes)"
    how = []
    if info.get("format", "text") != "text":
        how.append(info["format"])
    if "delimiter" in info:
        d = info["delimiter"]
        shown = {"\t": "tab", "whitespace": "whitespace"}.get(d, repr(d))
        reason = f" ({info['header_reason']})" if info.get("header_reason") else ""
        how.append(("header row" if info["header"] else "no header row") + reason
                   + f", delimiter {shown}" + (" (detected)" if info["delimiter_sniffed"] else "")
                   + (", decimal comma" if info["decimal"] == "," else ""))
    if "data_key" in info:
        how.append(f"data from key {info['data_key']!r}")
    if info.get("index_column") is not None:
        how.append(f"index column {info['index_column']} dropped ({info['index_reason']})")
    how.extend(f"dropped {d}" for d in info.get("dropped", ()))
    return text + (f"; {'; '.join(how)}" if how else "")


def _check_values(a, what):
    """Numbers or booleans only; complex data are refused rather than cut to the real part."""
    if isinstance(a, np.ndarray) and np.iscomplexobj(a):
        raise ValueError(f"{what}: complex data (dtype {a.dtype}) are not supported; pass the "
                         "real part (np.real), the modulus (np.abs), or both parts as features "
                         "(np.hstack([a.real, a.imag]))")
    if not _is_numeric(a):
        raise ValueError(f"{what}: expected numbers, got an array of dtype "
                         f"{getattr(a, 'dtype', type(a).__name__)}")


def _tidy_labels(y):
    y = np.asarray(y).ravel()
    if y.dtype.kind == "f" and y.size and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        y = y.astype(np.int64)
    elif y.dtype.kind in "iub":
        y = y.astype(np.int64)
    return y


def load_file(path, *, image_shape=None, order="F", resize=None, data_key=None, target_key=None,
              delimiter=None, header="auto", index_col=None, return_info=False):
    """Load a data matrix (and labels) from a .mat, .npz, .npy, .csv/.tsv/.txt or .parquet file.

    Parameters
    ----------
    path : str or path-like
        The file; its extension (case-insensitive) selects the reader: ``.mat`` (MATLAB v4-v7.2,
        ``scipy.io.loadmat``; v7.3/HDF5 is not supported), ``.npz``, ``.npy`` (one array, no
        labels), ``.csv``/``.tsv``/``.txt`` (a delimited table read with pandas: header row,
        delimiter, index column and label column detected as described below), the same
        compressed (``.csv.gz``, ``.csv.bz2``, ``.csv.xz``, ``.csv.zip`` holding one file), or
        ``.parquet``/``.pq`` (read with pandas and pyarrow, ``pip install
        'ntnumba[parquet]'``; its column names are the header, ``delimiter`` and ``header``
        do not apply).
    image_shape : tuple of int (h, w), optional
        Shape of one image when the data are flat rows of ``h * w`` pixels; ``h * w`` must equal
        the number of features. For a 3-D stack it is read from the stack (if given it must
        match).
    order : {"F", "C"}, default "F"
        How a flat row is an image: ``"F"`` for MATLAB column order (the default, as in the usual
        ``.mat`` face/object files), ``"C"`` for row-major. Used only with ``image_shape``; when
        the image shape is known, the returned rows are always re-flattened in C order, so that
        ``X[i].reshape(h, w)`` is the image.
    resize : tuple of int (h_out, w_out), optional
        Resample every image to this shape by area averaging (:func:`resize_images`). Needs the
        image shape (``image_shape`` or a 3-D stack).
    data_key : str, optional
        For .mat/.npz: the array holding the data. Default: the first of ``X``, ``fea``,
        ``images``, ``data`` that is a 2-D or 3-D numeric array, else the largest such array
        (other than the labels). Not allowed for .npy and tables.
    target_key : str, int or False, optional
        The labels. For .mat/.npz: the array holding them. Default: the first of ``Y``,
        ``gnd``, ``labels``, ``y``, ``target`` present, else no labels; ``False``: no labels
        (use it when a label-like key exists but is not the labels of the chosen data).
        For a table: a column name, a 0-based position (negative counts from the end) or
        ``"last"``; default: the column of the header named ``target``, ``label``, ``labels``,
        ``class``, ``y`` or ``gnd`` (case-insensitive), else no labels; ``False``: every column
        except the index is a feature. Labels may be numbers or strings. Not allowed for .npy.
    delimiter : str, optional
        Tables only: ``","``, ``";"``, ``"\t"``, ``"|"`` or ``"whitespace"``; default detected
        (equally frequent on the first 200 lines; ``;`` with ``1,5``: decimal comma).
    header : {"auto", True, False}, default "auto"
        Tables only: whether the first line holds column names. ``"auto"``: by types (as
        ``csv.Sniffer.has_header``): a header when one of its fields is text above a column of
        numbers on the (first 200) lines below; a first line of the lines' own types (a
        headerless iris table) is data. A ``#`` line (``numpy.savetxt``) is a header.
    index_col : str, int or False, optional
        Tables only: a column to drop (row names or numbers). Default: the first column when
        its header name is empty, as ``pandas.DataFrame.to_csv`` writes the index; ``False``:
        none.
    return_info : bool, default False
        Also return a dict of what was read: ``"description"`` (one line), ``"label_source"``,
        ``"feature_names"`` and, for tables, ``"format"``, ``"header"``, ``"index_column"``,
        ``"dropped"`` (what was not read, and why) and ``"delimiter"``.

    Returns
    -------
    X : ndarray of float64, shape (n_samples, n_features)
        One sample per row (3-D stacks flattened in C order; resampled if ``resize``). A
        ``.npz`` file written by ``scipy.sparse.save_npz`` gives its matrix as a
        ``scipy.sparse`` CSR matrix of float64 (and no labels).
    y : ndarray or None, shape (n_samples,)
        The labels as stored (not renumbered; int64 when they are whole numbers, strings when
        the column holds text), or None.
    info : dict
        Only with ``return_info=True`` (see there).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        Unknown extension, missing key (the message lists the keys), labels of no sample
        axis's length, a mismatched ``image_shape``, ``resize`` without an image shape.

    Notes
    -----
    The sample axis is the first axis, except when labels are found whose length matches the
    last axis but not the first: then the last axis is moved to the front (MATLAB conventions:
    one column per sample as in ``MNIST_subset604.mat``, or an ``h x w x n`` stack). Without
    labels no such guess is made. ``load_file`` does not normalise; use
    :func:`normalize_images`.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from ntnumba.datasets import load_file
    >>> images = np.arange(2 * 4 * 6, dtype=np.uint8).reshape(2, 4, 6)
    >>> path = os.path.join(tempfile.mkdtemp(), "toy.npz")
    >>> np.savez(path, images=images, labels=np.array([1, 2]))
    >>> X, y = load_file(path, resize=(2, 3))
    >>> X.shape, y.tolist()
    ((2, 6), [1, 2])
    >>> table = os.path.join(tempfile.mkdtemp(), "toy.csv")
    >>> with open(table, "w") as f:
    ...     for line in ("width;height;species", "1,5;2;cat", "2,5;4;dog", "3,0;6;cat"):
    ...         print(line, file=f)
    >>> X, y, info = load_file(table, target_key="species", return_info=True)
    >>> X.tolist(), y.tolist()
    ([[1.5, 2.0], [2.5, 4.0], [3.0, 6.0]], ['cat', 'dog', 'cat'])
    >>> print(info["description"])  # doctest: +NORMALIZE_WHITESPACE
    3 samples x 2 features, labels from column 'species' (2 classes); header row (detected:
    text 'width' above numbers), delimiter ';' (detected), decimal comma
    """
    path = Path(os.fspath(path))
    ext, compression = _file_kind(path)
    if ext in _PARQUET:
        ext, compression = ".csv", "parquet"     # a table, read by pandas
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    if image_shape is not None:
        image_shape = _check_shape(image_shape, "image_shape")
    if resize is not None:
        resize = _check_shape(resize, "resize")

    if ext not in _TABLES:
        for name, value in (("delimiter", delimiter), ("index_col", index_col)):
            if value not in (None, False):
                raise ValueError(f"{name} is only used for tables (.csv, .tsv, .txt), not {ext}")
    y = None
    label_name = None
    info = {"label_source": None, "feature_names": None}
    X = _read_sparse(path) if ext == ".npz" else None
    if X is not None:
        extra = [k for k, v in (("image_shape", image_shape), ("resize", resize),
                                ("data_key", data_key), ("target_key", target_key))
                 if v not in (None, False)]
        if extra:
            raise ValueError(f"{path} holds one scipy.sparse matrix (no images, keys or "
                             f"labels): {', '.join(extra)} not used")
        _check_values(X.data, str(path))
        info["format"] = f"sparse, {X.nnz} stored values"
        info["description"] = _describe(info, X.shape[0], X.shape[1], None)
        return (X, None, info) if return_info else (X, None)
    if ext in (".mat", ".npz"):
        arrays = _read_mapping(path, ext)
        tkey = _pick_target(arrays, target_key)
        dkey = _pick_data(arrays, data_key, exclude=tkey)
        if tkey == dkey:
            raise ValueError(f"data_key and target_key both name {dkey!r}")
        data = arrays[dkey]
        y = None if tkey is None else np.asarray(arrays[tkey]).ravel()
        label_name = f"key {tkey!r}" + (
            "" if target_key else " (auto-detected; target_key=False ignores it)"
        )
        info["label_source"] = label_name
        info["data_key"] = dkey
        unused = [repr(k) for k in sorted(arrays) if k not in (dkey, tkey)]
        if unused:
            info["dropped"] = [f"key(s) {', '.join(unused[:8])}{', ...' if len(unused) > 8 else ''}"
                               " (neither the data nor the labels)"]
        _check_values(data, f"{path}: {dkey!r}")
    else:
        if data_key is not None:
            raise ValueError(f"data_key is only used for .mat and .npz files, not {ext}")
        if ext == ".npy":
            if target_key not in (None, False):
                raise ValueError("target_key is not used for .npy files (they hold one array)")
            with _damaged(path, ".npy file of numbers"):
                data = np.load(path, allow_pickle=False)
            _check_values(data, str(path))
            if data.ndim not in (2, 3):
                raise ValueError(
                    f"{path}: expected a 2-D or 3-D numeric array, got dtype {data.dtype} "
                    f"shape {data.shape}"
                )
        else:  # a table
            data, y, table = _read_table(path, compression=compression,
                                         target_key=target_key, delimiter=delimiter,
                                         header=header, index_col=index_col)
            info.update(table)
            label_name = info["label_source"]

    data = np.asarray(data)
    if y is not None and y.size != data.shape[0]:
        if y.size == data.shape[-1]:
            data = np.moveaxis(data, -1, 0)
        else:
            raise ValueError(
                f"the labels ({label_name}, {y.size} values) match neither the first nor the last "
                f"axis of the data (shape {data.shape})"
            )
    n = data.shape[0]
    if data.ndim == 3:
        stack_shape = tuple(int(s) for s in data.shape[1:])
        if image_shape is not None and image_shape != stack_shape:
            raise ValueError(
                f"image_shape {image_shape} does not match the image stack's shape {stack_shape}"
            )
        image_shape = stack_shape
        X = data.reshape(n, -1).astype(np.float64)
    else:
        X = data.astype(np.float64)
        if image_shape is not None:
            h, w = image_shape
            if h * w != X.shape[1]:
                raise ValueError(
                    f"image_shape {image_shape} has {h * w} pixels but the data have "
                    f"n_features={X.shape[1]}"
                )
            X = X.reshape(n, h, w, order=order).reshape(n, h * w)
    if resize is not None:
        if image_shape is None:
            raise ValueError("resize needs the image shape: pass image_shape=(h, w) for flat rows")
        X = resize_images(X, image_shape, resize, order="C")
    X = np.ascontiguousarray(X)
    y = None if y is None else _tidy_labels(y)
    if not return_info:
        return X, y
    info["description"] = _describe(info, X.shape[0], X.shape[1], y)
    return X, y, info

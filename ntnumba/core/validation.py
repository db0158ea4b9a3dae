"""Input checks shared by the kernel API and the estimator: clear errors naming the argument."""
import importlib
import numbers
import os
import sys

import numpy as np

FLOAT_DTYPES = (np.float64, np.float32)

#: the folder of the package's modules (frames of files below it are internal)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_IMPORTLIB_DIR = os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep


class MemoryUsageWarning(UserWarning):
    """A fit's estimated memory is above half of the memory available (the model's: or 2 GiB).

    Shown by Python's default warning filters (a ``UserWarning``); the fit goes on. Above all
    of the available memory the fit raises a ``MemoryError`` naming the fix instead. Filter it
    with the usual tools when the estimate is known to be safe.

    Examples
    --------
    >>> import warnings
    >>> import ntnumba
    >>> issubclass(ntnumba.MemoryUsageWarning, UserWarning)
    True
    >>> with warnings.catch_warnings():   # silence it around a fit known to be safe
    ...     warnings.filterwarnings("ignore", category=ntnumba.MemoryUsageWarning)
    """


def _internal_dirs():
    """Folders whose frames a warning skips (:func:`user_stacklevel`): ntnumba's, importlib's
    and, when loaded, scikit-learn's, joblib's and numba's."""
    dirs = [_PACKAGE_DIR, _IMPORTLIB_DIR]
    for name in ("sklearn", "joblib", "numba"):
        file = getattr(sys.modules.get(name), "__file__", None)
        if file is not None:
            dirs.append(os.path.dirname(os.path.abspath(file)) + os.sep)
    return tuple(dirs)


def _import_machinery(frame):
    """Frames of the import system, which ``warnings.warn`` skips without counting them in
    ``stacklevel`` (``warnings._is_internal_frame``)."""
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name


def user_stacklevel():
    """The ``stacklevel`` at which a ``warnings.warn`` in the calling function names the user's
    call: the first frame outside ntnumba, scikit-learn (``fit_predict``, pipelines,
    ``GridSearchCV`` through joblib), joblib and numba (the outermost when every frame is
    theirs); a warning raised while ntnumba is imported names the user's ``import``.

    Examples
    --------
    >>> import warnings
    >>> from ntnumba.core.validation import user_stacklevel
    >>> def inner():
    ...     warnings.warn("careful", UserWarning, stacklevel=user_stacklevel())
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     inner()
    >>> w[0].filename == inner.__code__.co_filename   # no ntnumba frame between
    True
    """
    dirs = _internal_dirs()
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while os.path.abspath(frame.f_code.co_filename).startswith(dirs):
        caller = frame.f_back
        while caller is not None and _import_machinery(caller):  # not counted (a warning at
            caller = caller.f_back                                # import names the import)
        if caller is None:
            break
        frame = caller
        level += 1
    return level


def as_float_array(a, name, *, ndim=None, dtype=None, allow_empty=False):
    """Return ``a`` as a C-contiguous float32/float64 array, raising a clear error otherwise.

    Integer and boolean input become float64; float32 is kept unless ``dtype`` says otherwise.
    The input is never modified (a copy is made only when needed).
    """
    arr = np.asarray(a)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number)
                                   or arr.dtype == np.bool_):
        raise TypeError(f"{name}: expected a numeric array, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name}: complex data is not supported (dtype {arr.dtype})")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name}: array is empty (shape {arr.shape})")
    if dtype is None:
        dtype = arr.dtype if arr.dtype in FLOAT_DTYPES else np.float64
    arr = np.ascontiguousarray(arr, dtype=dtype)
    check_finite(arr, name)
    return arr


def check_finite(arr, name):
    """Raise ValueError naming ``name``, the count and the first row of non-finite entries."""
    if not np.all(np.isfinite(arr)):
        bad = ~np.isfinite(arr)
        count = int(bad.sum())
        first = np.argwhere(bad)[0]
        where = f"row {first[0]}" if arr.ndim > 1 else f"index {first[0]}"
        raise ValueError(f"{name}: contains {count} NaN or infinite value(s), first at {where}")


def check_scalar(value, name, *, low=None, low_inclusive=True, high=None, integer=False):
    """Check a real (or integer) hyper-parameter and its range; returns it as float or int."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        what = "an integer" if integer else "a real number"
        raise TypeError(f"{name}: expected {what}, got {value!r}")
    if not isinstance(value, numbers.Integral) and not np.isfinite(value):  # ints: finite
        raise ValueError(f"{name}: must be finite, got {value!r}")
    if low is not None and (value < low or (not low_inclusive and value == low)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name}: must be {op} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name}: must be <= {high}, got {value!r}")
    return int(value) if integer else float(value)


def check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}: expected one of {sorted(choices)}, got {value!r}")
    return value


def check_bool(value, name):
    """``value`` as a bool; a TypeError naming ``name`` for anything but True/False."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool (True or False), got {value!r}")
    return bool(value)


def check_seed(value, name="random_state"):
    """A ``random_state``: None, an int in [0, 2**32 - 1] or a ``numpy.random.RandomState``."""
    if value is None or isinstance(value, np.random.RandomState):
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if 0 <= value <= 2 ** 32 - 1:
            return value
        raise ValueError(f"{name}: an integer seed must be in [0, 2**32 - 1], got {value!r}")
    raise TypeError(f"{name}: expected None, an int in [0, 2**32 - 1] or a "
                    f"numpy.random.RandomState, got {value!r}")


# ------------------------------------------------------------------ declarative parameters
class Interval:
    """A real (``kind=numbers.Real``) or integer (``numbers.Integral``) parameter in a range.

    One entry of an estimator's ``_parameter_constraints`` (scikit-learn's ``Interval`` in
    spirit, with this package's messages: :func:`check_scalar`). Integers are at most
    ``2**63 - 1`` unless ``high`` says less.

    Examples
    --------
    >>> import numbers
    >>> from ntnumba.core.validation import Interval, validate_params
    >>> validate_params({"k": 3}, {"k": [Interval(numbers.Integral, 1)]})
    {'k': 3}
    >>> validate_params({"k": 10**20}, {"k": [Interval(numbers.Integral, 1)]})
    Traceback (most recent call last):
    ...
    ValueError: k: must be <= 9223372036854775807, got 100000000000000000000
    """

    def __init__(self, kind, low=None, high=None, *, low_inclusive=True):
        self.integer = issubclass(kind, numbers.Integral)
        self.low, self.high, self.low_inclusive = low, high, low_inclusive
        if self.integer and high is None:
            self.high = 2 ** 63 - 1

    def accepts(self, value):
        kind = numbers.Integral if self.integer else numbers.Real
        return isinstance(value, kind) and not isinstance(value, bool)

    def check(self, value, name):
        return check_scalar(value, name, low=self.low, low_inclusive=self.low_inclusive,
                            high=self.high, integer=self.integer)

    def __str__(self):
        what = "an integer" if self.integer else "a real number"
        if self.low is not None:
            what += f" {'>=' if self.low_inclusive else '>'} {self.low}"
        return what


class Options:
    """One of a few strings (``Options("auto")``, ``Options("graph", "objective")``)."""

    def __init__(self, *choices):
        self.choices = set(choices)

    def accepts(self, value):
        return isinstance(value, str)

    def check(self, value, name):
        return check_choice(value, name, self.choices)

    def __str__(self):
        return " or ".join(repr(c) for c in sorted(self.choices))


class Boolean:
    """True or False (NumPy booleans included)."""

    def accepts(self, value):
        return isinstance(value, (bool, np.bool_))

    def check(self, value, name):
        return check_bool(value, name)

    def __str__(self):
        return "a bool"


class Seed:
    """A ``random_state``: None, an int in [0, 2**32 - 1] or a ``numpy.random.RandomState``."""

    def accepts(self, value):
        return True

    def check(self, value, name):
        return check_seed(value, name)

    def __str__(self):
        return "a random_state"


class Sequence:
    """A non-empty list or tuple whose every item satisfies ``item`` (returned as a tuple)."""

    def __init__(self, item):
        self.item = item

    def accepts(self, value):
        return isinstance(value, (list, tuple, np.ndarray))

    def check(self, value, name):
        if len(value) == 0:
            raise ValueError(f"{name}: expected a non-empty sequence, got an empty one")
        return tuple(self.item.check(v, name) for v in value)

    def __str__(self):
        return f"a non-empty sequence of {self.item}s"


def validate_params(values, constraints):
    """Check every parameter of ``values`` (name -> value) against ``constraints`` (name ->
    list of alternatives: :class:`Interval`, :class:`Options`, :class:`Boolean`,
    :class:`Seed`, :class:`Sequence` or ``None`` for the value None); returns the checked
    values (ints as int, reals as float, sequences as tuples).

    The first alternative that takes the value's type decides, with its own message naming the
    parameter; a value of no accepted type is a ``TypeError`` listing the alternatives.
    """
    out = {}
    for name, alternatives in constraints.items():
        value = values[name]
        for alt in alternatives:
            if alt is None:
                if value is None:
                    out[name] = None
                    break
            elif alt.accepts(value):
                out[name] = alt.check(value, name)
                break
        else:
            allowed = " or ".join("None" if a is None else str(a) for a in alternatives)
            raise TypeError(f"{name}: expected {allowed}, got {value!r}")
    return out

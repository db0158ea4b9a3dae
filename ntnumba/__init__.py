"""ntnumba: clustering with jointly learned nonlinear transforms, accelerated with numba.

Implements Kostadinov et al., "Clustering with Jointly Learned Nonlinear Transforms Over
Discriminating Min-Max Similarity/Dissimilarity Assignment" (2019).

Public API: :class:`NTClustering` (scikit-learn estimator), :func:`load` (saved models),
:class:`MemoryUsageWarning` (a fit close to the available memory), :mod:`ntnumba.kernels`
(arrays in, arrays out), :mod:`ntnumba.datasets`, :mod:`ntnumba.metrics`.

The names are imported on first use (PEP 562), so that ``import ntnumba`` and the command's
``--help`` do not pay for numba, SciPy and scikit-learn until they are needed.
"""
import importlib

__all__ = ["MemoryUsageWarning", "NTClustering", "datasets", "kernels", "load", "metrics",
           "__version__"]

#: name -> (module, attribute or None for the module itself)
_LAZY = {"MemoryUsageWarning": (".core.validation", "MemoryUsageWarning"),
         "NTClustering": (".estimators.clustering", "NTClustering"),
         "load": (".estimators.clustering", "load"),
         "datasets": (".datasets", None), "kernels": (".kernels", None),
         "metrics": (".metrics", None)}


def _read_version():
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ntnumba")
    except PackageNotFoundError:  # pragma: no cover - a source tree without install
        return "0+unknown"


def __getattr__(name):
    if name == "__version__":
        globals()[name] = value = _read_version()
        return value
    if name not in _LAZY:
        raise AttributeError(f"module 'ntnumba' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module, __name__)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))

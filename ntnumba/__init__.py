"""ntnumba: clustering with jointly learned nonlinear transforms, accelerated with numba.

Implements Kostadinov et al., "Clustering with Jointly Learned Nonlinear Transforms Over
Discriminating Min-Max Similarity/Dissimilarity Assignment" (2019).

Public API: :class:`NTClustering` (scikit-learn estimator), :func:`load` (saved models),
:mod:`ntnumba.kernels` (arrays in, arrays out), :mod:`ntnumba.datasets`, :mod:`ntnumba.metrics`.
"""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("ntnumba")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0+unknown"

from . import datasets, kernels, metrics  # noqa: E402
from ._estimator import NTClustering  # noqa: E402
from ._persistence import load  # noqa: E402

__all__ = ["NTClustering", "datasets", "kernels", "load", "metrics", "__version__"]

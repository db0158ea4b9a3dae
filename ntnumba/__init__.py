"""ntnumba: clustering with jointly learned nonlinear transforms, accelerated with numba.

Implements Kostadinov et al., "Clustering with Jointly Learned Nonlinear Transforms Over
Discriminating Min-Max Similarity/Dissimilarity Assignment" (2019).
"""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("ntnumba")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0+unknown"

from . import kernels  # noqa: E402

__all__ = ["kernels", "__version__"]

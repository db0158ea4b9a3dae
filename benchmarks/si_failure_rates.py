"""Measure how often Stage 1's support iteration (SI+) and its safeguard reach the global minimum.

Reproduces the table "Measured failure rates" of ``docs/algorithm.md``. Ground truth: the
enumeration of every support (``tests/naive.py: candidate_enum``), exact for small M. Instances:
``q ~ N(0, I)``, ``tau, nu ~ N(0, I)``, lambda1 = 0.03, 100 instances per seed, fixed seeds (the
rows with lambda0 >= 0.5 are those of ``tests/test_stage1.py::
test_candidate_large_lambda0_failure_rates``). A result counts as exact when its objective
equals the enumerated minimum to a relative 1e-9 (or both are +inf: an invalid candidate).

Columns: "SI+ alone" = SI+ converged and its point was returned without the safeguard (status
0) and is exact; "SI+ silently wrong" = SI+ converged (status 0) to a point that is not the
global minimum (the safeguard does not run then unless ``safeguard=True``); "default" =
``candidate_nt(...)`` (SI+, the safeguard when SI+ fails); "safeguard=True" = both always, the
better point kept.

Run from the repository root: ``python benchmarks/si_failure_rates.py`` (a few seconds).
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import naive  # noqa: E402

from ntnumba.kernels import candidate_nt  # noqa: E402

LAMBDA1 = 0.03
ROWS = [(0.03, 8, range(10)), (0.5, 7, [3]), (2.0, 7, [4]), (5.0, 6, [5])]  # lambda0, M, seeds
N_INSTANCES = 100   # per seed


def same(v, ref, rtol=1e-9):
    if np.isinf(ref):
        return bool(np.isinf(v))
    return bool(np.isfinite(v) and abs(v - ref) <= rtol * abs(ref))


def measure(lam0, M, seed, n=N_INSTANCES):
    """Counts (SI+ alone exact, SI+ silently wrong, default exact, safeguard=True exact)."""
    rng = np.random.default_rng(seed)
    si = wrong = default = guarded = 0
    for _ in range(n):
        q, tau, nu = rng.standard_normal((3, M))
        _, ref = naive.candidate_enum(q, tau, nu, lam0, LAMBDA1)
        _, v, status = candidate_nt(q, tau, nu, lam0, LAMBDA1, return_status=True)
        _, vg = candidate_nt(q, tau, nu, lam0, LAMBDA1, safeguard=True)
        si += status == 0 and same(v, ref)
        wrong += status == 0 and not same(v, ref)
        default += same(v, ref)
        guarded += same(vg, ref)
    return np.array([si, wrong, default, guarded])


def main():
    print("| lambda0 | M | instances | SI+ alone | SI+ silently wrong | default | "
          "safeguard=True |")
    print("|---|---|---|---|---|---|---|")
    for lam0, M, seeds in ROWS:
        c = sum(measure(lam0, M, s) for s in seeds)
        n = N_INSTANCES * len(seeds)
        print(f"| {lam0} | {M} | {n} | " + " | ".join(str(int(v)) for v in c) + " |")


if __name__ == "__main__":
    main()

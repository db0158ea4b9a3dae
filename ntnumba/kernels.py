"""Low-level kernel API: arrays in, arrays out, for embedding in other scientific codes.

Stage 1 (candidates, quartic, assignment):
:func:`candidate_nt`, :func:`solve_quartic`, :func:`assign`, :func:`adjustment_term`.
"""
from ._quartic import solve_quartic
from ._stage1 import adjustment_term, assign, candidate_nt

__all__ = ["adjustment_term", "assign", "candidate_nt", "solve_quartic"]

"""Low-level kernel API: arrays in, arrays out, for embedding in other scientific codes.

Samples are rows: ``Q = X @ A.T`` (n x M), ``Y`` (n x M), ``tau`` (Cd x M), ``nu`` (Cs x M),
``A`` (M x N).

Stage 1 (candidates, quartic, assignment):
    :func:`candidate_nt`, :func:`solve_quartic`, :func:`assign`, :func:`adjustment_term`.
Stage 2 (dissimilarity and similarity parameters):
    :func:`update_theta`, :func:`theta_objective`, :func:`prior_up`, :func:`theta_statistics`.
Stage 3 (linear map):
    :func:`update_transform`, :func:`transform_objective`, :func:`transform_gradient`,
    :func:`transform_statistics`, :func:`transform_singular_values`, :func:`identity_transform`.
"""
from .model.quartic import solve_quartic
from .model.stage1 import adjustment_term, assign, candidate_nt
from .model.theta import prior_up, theta_objective, theta_statistics, update_theta
from .model.transform import (identity_transform, transform_gradient, transform_objective,
                         transform_singular_values, transform_statistics, update_transform)

__all__ = ["adjustment_term", "assign", "candidate_nt", "identity_transform", "prior_up",
           "solve_quartic", "theta_objective", "theta_statistics", "transform_gradient",
           "transform_objective", "transform_singular_values", "transform_statistics",
           "update_theta", "update_transform"]

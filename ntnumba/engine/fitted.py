"""The fitted model: what a fit leaves besides the estimator's public attributes, in one object.

In the spirit of hdbscan's ``PredictionData``: the fit (:func:`ntnumba.engine.loop.fit`,
:func:`ntnumba.engine.loop.partial`) or a model file (:func:`ntnumba.io.persistence.read_model`)
builds a :class:`FittedModel` once; the estimator, the model files and the Dask backend read
it, and none of them reads another's private attributes.
"""
import copy
from dataclasses import dataclass, replace

import numpy as np


@dataclass
class FittedModel:
    """The private part of a fitted :class:`ntnumba.NTClustering`.

    Attributes
    ----------
    params : ntnumba.engine.loop.Params
        The validated parameters the model was fitted with.
    state : ntnumba.engine.loop.State
        The last complete iterate (``A``, ``tau``, ``nu``, labels, objective history and, for
        the graph rule, the partition's summary ``state.graph``).
    rng_state : tuple
        The fit's random stream (``numpy.random.RandomState.get_state()``), which a
        ``warm_start`` continues.
    ref_X : ndarray of shape (n_ref, n_features) or None
        Graph rule: the scaled reference rows of the k-NN vote of ``predict``.
    ref_labels : ndarray of shape (n_ref,) or None
        Graph rule: their clusters (None: the first ``n_ref`` entries of ``labels_``).
    stream : dict or None
        ``partial_fit``'s running sums, which the next call continues.
    sums_lost : bool
        A model file older than version 3: a ``partial_fit`` restarts its running sums.
    """

    params: object
    state: object
    rng_state: tuple = None
    ref_X: np.ndarray = None
    ref_labels: np.ndarray = None
    stream: dict = None
    sums_lost: bool = False

    def ref_rows(self):
        """Training rows of the reference set ``ref_X`` (None: all, in order)."""
        return None if not self.state.graph else self.state.graph.get("ref_rows")

    def reference_labels(self, labels):
        """The clusters of the reference rows (``labels``: the model's ``labels_``)."""
        if self.ref_labels is not None:
            return self.ref_labels
        return np.asarray(labels)[:self.ref_X.shape[0]]  # a model file (reference first)

    def reference_values(self, a):
        """The entries of a per-training-sample array that belong to the reference set."""
        rows = self.ref_rows()
        a = np.asarray(a)
        return a[:self.ref_X.shape[0]] if rows is None else a[rows]

    def portable(self, attrs):
        """``(attrs, fitted)`` of a model that predicts the same from its reference set alone.

        When the reference set is a sample of the training rows (chunked and Dask fits of
        more than ``REFERENCE_SIZE`` rows), ``labels_`` and the per-sample arrays become those
        of the reference rows, aligned with ``ref_X`` (the local model of
        :mod:`ntnumba.dask`); otherwise both are returned as they are.

        Examples
        --------
        >>> import numpy as np
        >>> from ntnumba.engine.fitted import FittedModel
        >>> from ntnumba.engine.loop import State
        >>> state = State(A=None, tau=np.zeros((2, 3)), nu=np.zeros((1, 3)),
        ...               graph={"ref_rows": np.array([0, 2])})
        >>> fm = FittedModel(params=None, state=state, ref_X=np.zeros((2, 3)),
        ...                  ref_labels=np.array([1, 0]))
        >>> attrs, local = fm.portable({"labels_": np.array([1, 1, 0])})
        >>> attrs["labels_"].tolist(), local.ref_rows() is None
        ([1, 0], True)
        """
        rows = self.ref_rows()
        if rows is None:
            return attrs, self
        attrs = dict(attrs)
        attrs["labels_"] = self.ref_labels
        for k in ("similarity_labels_", "outlier_scores_", "probabilities_", "initial_labels_"):
            if k in attrs:
                attrs[k] = np.asarray(attrs[k])[rows]
        state = copy.copy(self.state)
        state.graph = dict(self.state.graph, ref_rows=None)   # the rows are the file's
        return attrs, replace(self, state=state)

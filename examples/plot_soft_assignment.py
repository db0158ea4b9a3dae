"""
Soft assignment, outlier scores and rejection
=============================================

:class:`ntnumba.NTClustering` assigns every sample to one cluster (``labels_``,
:meth:`~ntnumba.NTClustering.predict`) and also scores how sure that assignment is:

* :meth:`~ntnumba.NTClustering.predict_proba` gives one score per cluster, summing to 1
  (with the default ``assign="graph"``: the shares of the similarity-weighted vote of the
  ``n_neighbors`` most similar training samples);
* ``probabilities_`` is that score for each training sample's own cluster, and
  ``outlier_scores_`` the score the rejection option thresholds
  (``predict(X, reject="auto")`` labels ``-1`` what scores above ``reject_threshold_``).

Three overlapping Gaussian blobs in 10 dimensions, and new points in them and between them.
"""
import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA

from ntnumba import NTClustering
from ntnumba.metrics import clustering_accuracy

rng = np.random.default_rng(0)
centers = 1.4 * rng.standard_normal((3, 10))
X = np.repeat(centers, 60, axis=0) + rng.standard_normal((180, 10))
y = np.repeat(np.arange(3), 60)

model = NTClustering(n_clusters=3, n_components=40, random_state=0).fit(X)
print(f"clustering accuracy: {clustering_accuracy(y, model.labels_):.3f}")
print(f"fit_predict == fit().predict(): {bool((model.predict(X) == model.labels_).all())}")

# %%
# The soft scores of the training samples: most are 1 (all neighbours agree), the samples
# between two blobs score lower.
proba = model.predict_proba(X)
print("predict_proba of the first three samples:\n", np.round(proba[:3], 3))
print(f"samples with probabilities_ < 0.8: {int((model.probabilities_ < 0.8).sum())}")

# %%
# New samples: three from the blobs and three in the middle of all three blobs. The
# rejection option labels ``-1`` those whose outlier score (one minus the mean NT similarity
# to their most similar training samples) is above the largest leave-one-out score of a
# training sample, ``reject_threshold_``. The score measures agreement of the sparse
# representations' supports and signs, not distance: far points along the data's directions
# are not rejected.
middle = centers.mean(axis=0) + 0.1 * rng.standard_normal((3, 10))
new = np.r_[centers + 0.5 * rng.standard_normal((3, 10)), middle]
print("labels:         ", model.predict(new))
print("with rejection: ", model.predict(new, reject="auto"))
print("soft scores:\n", np.round(model.predict_proba(new), 2))
print(f"reject_threshold_ = {model.reject_threshold_:.3f}; training outlier_scores_ from "
      f"{model.outlier_scores_.min():.3f} to {model.outlier_scores_.max():.3f}")

# %%
# Projected on the first two principal components: colour is the cluster, transparency the
# soft score ``probabilities_``.
P = PCA(2, random_state=0).fit(X)
Z = P.transform(X)
fig, ax = plt.subplots(figsize=(5, 4))
colors = plt.cm.tab10(model.labels_)
colors[:, 3] = 0.15 + 0.85 * model.probabilities_
ax.scatter(Z[:, 0], Z[:, 1], c=colors, s=18)
Zn = P.transform(new)
ax.scatter(Zn[:, 0], Zn[:, 1], marker="x", c="k", label="new samples")
ax.set_xlabel("PC 1")
ax.set_ylabel("PC 2")
ax.legend(loc="best")
ax.set_title("clusters, shaded by probabilities_")
fig.tight_layout()

"""Pictures of a clustering: objective per iteration, cluster montage, assignment-score histogram.

The plotting functions need matplotlib (``pip install "ntnumba[plot]"``, else an ImportError
saying so); :func:`assignment_scores` needs only NumPy. Each builds a
:class:`matplotlib.figure.Figure` without ``pyplot`` (no GUI backend, no global state), returns
it and writes it to ``path`` if given, uncropped: a PNG is exactly ``round(size * dpi)`` pixels.

The paper's rejection option (Sec. 1, (d)) leaves a sample unassigned when its best candidate
scores badly or its best two clusters score alike: :func:`assignment_scores` gives both
statistics, :func:`plot_score_histogram` their distribution with a threshold.
"""
import numpy as np

__all__ = [
    "assignment_scores",
    "montage_size",
    "plot_cluster_montage",
    "plot_objective",
    "plot_score_histogram",
]

#: Size of one image of the montage, inches (50 px at the default dpi of 100).
CELL_INCHES = 0.5
#: Left margin of the montage for the row labels, inches.
LABEL_INCHES = 1.8
#: Top margin of the montage for the title, inches.
TITLE_INCHES = 0.4
DPI = 100


def _figure(figsize, dpi):
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("ntnumba.plotting needs matplotlib: pip install \"ntnumba[plot]\" "
                          "(or pip install matplotlib)") from None
    return Figure(figsize=figsize, dpi=dpi)


def _save(fig, path, dpi):
    if path is not None:
        import matplotlib
        # never cropped, whatever the user's matplotlibrc says: the size is the figure's
        with matplotlib.rc_context({"savefig.bbox": "standard"}):
            fig.savefig(path, dpi=dpi)
    return fig


def _history(objective):
    h = getattr(objective, "objective_history_", objective)
    h = np.asarray(h, dtype=np.float64).ravel()
    if h.size == 0:
        raise ValueError("objective: the history is empty (no completed iteration)")
    return h


def plot_objective(objective, *, path=None, log=None, title=None, dpi=DPI):
    """The objective of the learning problem per iteration, and its relative decrease.

    Parameters
    ----------
    objective : fitted NTClustering or array-like of shape (n_iter,)
        A model (its ``objective_history_``) or the values themselves.
    path : str or path-like, optional
        Write the figure there (the format from the extension, e.g. ``.png``).
    log : bool, optional
        Logarithmic y axis; default: when the values are positive and span more than a factor 10.
    title : str, optional
        Figure title.
    dpi : int, default 100
        Resolution used for ``path``; the figure is 7 x 3.2 inches.

    Returns
    -------
    matplotlib.figure.Figure
        Two panels: the objective, and the relative change ``(f_{k-1} - f_k) / |f_{k-1}|`` per
        iteration (log scale; the quantity compared with ``tol``).

    Examples
    --------
    >>> from ntnumba.plotting import plot_objective
    >>> fig = plot_objective([10.0, 6.0, 5.0, 4.8, 4.79])
    >>> [ax.get_ylabel() for ax in fig.axes]
    ['objective', 'relative decrease']
    """
    h = _history(objective)
    it = np.arange(1, h.size + 1)
    fig = _figure((7.0, 3.2), dpi)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(it, h, marker="o", ms=3)
    if log is None:
        log = bool(np.all(h > 0) and h.max() > 10 * h.min())
    if log:
        ax1.set_yscale("log")
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("objective")
    if h.size > 1:
        rel = (h[:-1] - h[1:]) / np.maximum(np.abs(h[:-1]), 1e-300)
        pos = rel > 0
        ax2.semilogy(it[1:][pos], rel[pos], marker="o", ms=3, ls="-")
        if np.any(~pos):
            ax2.plot(it[1:][~pos], np.full((~pos).sum(), np.nan), ls="none")
    ax2.set_xlabel("iteration")
    ax2.set_ylabel("relative decrease")
    from matplotlib.ticker import MaxNLocator
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title or f"objective per iteration ({h.size} iterations)")
    fig.tight_layout()
    return _save(fig, path, dpi)


def montage_size(n_rows, n_cols, dpi=DPI):
    """Pixel size ``(width, height)`` of :func:`plot_cluster_montage` for a grid of images.

    Examples
    --------
    >>> from ntnumba.plotting import montage_size
    >>> montage_size(20, 10)
    (680, 1040)
    """
    w = LABEL_INCHES + n_cols * CELL_INCHES
    h = TITLE_INCHES + n_rows * CELL_INCHES
    return int(round(w * dpi)), int(round(h * dpi))


def _pick_members(members, n, order_key):
    """``n`` members of a cluster: the best ``order_key`` first, else evenly spaced."""
    if members.size <= n:
        chosen = members
        if order_key is not None:
            chosen = chosen[np.argsort(order_key[chosen], kind="stable")]
        return chosen
    if order_key is not None:
        return members[np.argsort(order_key[members], kind="stable")[:n]]
    return members[np.linspace(0, members.size - 1, n).round().astype(int)]


def plot_cluster_montage(images, labels, image_shape=None, *, n_per_cluster=10, order=None,
                         true_labels=None, path=None, title=None, dpi=DPI):
    """One row of sample images per cluster.

    Parameters
    ----------
    images : array-like of shape (n_samples, h * w) or (n_samples, h, w)
        The images (flat rows in C order, as returned by :mod:`ntnumba.datasets`). They need not
        be the data that was clustered (e.g. show 32x32 images of a clustering done at 16x16).
    labels : array-like of int, shape (n_samples,)
        Cluster of each image (``-1``: rejected, shown as its own last row when present).
    image_shape : tuple (h, w), optional
        Needed for flat rows; for square images ``h = w = sqrt(n_features)`` is assumed.
    n_per_cluster : int, default 10
        Images per row.
    order : array-like of shape (n_samples,), optional
        Shows the members with the smallest values first (e.g. the assignment score from
        :func:`assignment_scores`: the most typical members). Default: evenly spaced members.
    true_labels : array-like, optional
        Known classes: each row label then also gives the cluster's majority class and its share.
    path : str or path-like, optional
        Write the figure there.
    title : str, optional
    dpi : int, default 100
        The PNG is :func:`montage_size` ``(n_rows, n_per_cluster, dpi)`` pixels.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.plotting import plot_cluster_montage
    >>> images = np.random.default_rng(0).random((30, 8, 8))
    >>> fig = plot_cluster_montage(images, np.repeat([0, 1, 2], 10), n_per_cluster=4)
    >>> tuple(int(v) for v in fig.get_size_inches() * fig.dpi)
    (380, 190)
    """
    imgs = np.asarray(images, dtype=np.float64)
    labels = np.asarray(labels).ravel()
    if imgs.ndim == 2:
        if image_shape is None:
            side = int(round(np.sqrt(imgs.shape[1])))
            if side * side != imgs.shape[1]:
                raise ValueError(f"image_shape: needed for images of {imgs.shape[1]} pixels "
                                 "(not square)")
            image_shape = (side, side)
        h, w = (int(s) for s in image_shape)
        if h * w != imgs.shape[1]:
            raise ValueError(f"image_shape {image_shape} has {h * w} pixels, the images have "
                             f"{imgs.shape[1]}")
        imgs = imgs.reshape(-1, h, w)
    elif imgs.ndim != 3:
        raise ValueError(f"images: expected a 2-D or 3-D array, got shape {imgs.shape}")
    n, h, w = imgs.shape
    if labels.shape[0] != n:
        raise ValueError(f"labels: expected {n} values (one per image), got {labels.shape[0]}")
    n_per_cluster = int(n_per_cluster)
    if n_per_cluster < 1:
        raise ValueError(f"n_per_cluster: must be >= 1, got {n_per_cluster}")
    order = None if order is None else np.asarray(order, dtype=np.float64).ravel()
    clusters = [c for c in np.unique(labels) if c != -1] + ([-1] if np.any(labels == -1) else [])
    n_rows = len(clusters)
    # one canvas: every image scaled to [0, 1] on its own, a 1-pixel white gap between cells
    canvas = np.ones((n_rows * (h + 1) - 1, n_per_cluster * (w + 1) - 1))
    names = []
    for r, c in enumerate(clusters):
        members = np.flatnonzero(labels == c)
        for k, i in enumerate(_pick_members(members, n_per_cluster, order)):
            im = imgs[i]
            lo, hi = im.min(), im.max()
            im = (im - lo) / (hi - lo) if hi > lo else np.zeros_like(im)
            canvas[r * (h + 1):r * (h + 1) + h, k * (w + 1):k * (w + 1) + w] = im
        name = "rejected" if c == -1 else f"cluster {c}"
        name += f"  n={members.size}"
        if true_labels is not None and members.size:
            t = np.asarray(true_labels).ravel()[members]
            vals, counts = np.unique(t, return_counts=True)
            j = int(np.argmax(counts))
            name += f"\nclass {vals[j]}: {counts[j] / members.size:.0%}"
        names.append(name)
    W, H = montage_size(n_rows, n_per_cluster, dpi)
    fig = _figure((W / dpi, H / dpi), dpi)
    left = LABEL_INCHES * dpi / W
    top = 1.0 - TITLE_INCHES * dpi / H
    ax = fig.add_axes((left, 0.0, 1.0 - left, top))
    ax.imshow(canvas, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    ax.set_xticks([])
    ax.set_yticks([r * (h + 1) + (h - 1) / 2 for r in range(n_rows)])
    ax.set_yticklabels(names, fontsize=7)
    ax.tick_params(axis="y", length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    fig.suptitle(title or f"{n_rows} clusters, {min(n_per_cluster, n)} samples per row",
                 y=1.0 - 0.5 * TITLE_INCHES * dpi / H, va="center", fontsize=10)
    return _save(fig, path, dpi)


def assignment_scores(model, X):
    """Per-sample statistics of the assignment: the scores of the rejection option.

    Parameters
    ----------
    model : fitted NTClustering
    X : array-like of shape (n_samples, n_features)

    Returns
    -------
    score : ndarray of shape (n_samples,), float64
        The score :meth:`ntnumba.NTClustering.predict` compares with the threshold of its
        rejection option: ``predict(X, reject=t)`` labels ``-1`` exactly the samples with
        ``score > t`` (what the score is for each ``assign`` rule: see ``predict``; for
        ``"objective"`` the full per-sample cost, for ``"paper"`` the min-max score ``sP``).
        Large = atypical.
    margin : ndarray of shape (n_samples,), float64
        The best score over the other clusters minus the best score (>= 0). Small = ambiguous.
        ``inf`` with one cluster, when no other cluster has a valid candidate, and for
        ``assign="graph"`` (its score is not computed per cluster).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba import NTClustering
    >>> from ntnumba.plotting import assignment_scores
    >>> X = np.r_[np.zeros((10, 3)), np.full((10, 3), 4.0)]
    >>> X += np.random.default_rng(0).standard_normal(X.shape) * 0.1
    >>> model = NTClustering(2, n_components=12, random_state=0).fit(X)
    >>> score, margin = assignment_scores(model, X)
    >>> score.shape, bool(np.all(margin > 0))
    ((20,), True)
    >>> t = np.median(score)
    >>> bool(np.array_equal(model.predict(X, reject=t) == -1, score > t))
    True
    """
    from .estimators.clustering import candidate_scores

    scores = candidate_scores(model, X)
    n = scores.shape[0]
    flat = np.asarray(scores, dtype=np.float64).reshape(n, -1)
    score = flat.min(axis=1)
    if scores.ndim != 3 or scores.shape[1] < 2:
        return score, np.full(n, np.inf)
    per_cluster = np.asarray(scores, dtype=np.float64).min(axis=2)     # (n, C)
    best = per_cluster.argmin(axis=1)
    other = per_cluster.copy()
    other[np.arange(n), best] = np.inf
    with np.errstate(invalid="ignore"):
        margin = other.min(axis=1) - score
    return score, np.where(np.isnan(margin), np.inf, margin)


def plot_score_histogram(values, *, threshold=None, reject_quantile=None, higher_is_worse=True,
                         bins=50, log=False, xlabel="assignment score", path=None, title=None,
                         dpi=DPI):
    """Histogram of per-sample assignment scores with a rejection threshold.

    Parameters
    ----------
    values : array-like of shape (n_samples,)
        Scores (e.g. ``score`` or ``margin`` of :func:`assignment_scores`); non-finite values are
        counted in the legend but not drawn.
    threshold : float, optional
        Samples beyond it would be rejected; drawn as a vertical line with the rejected share.
    reject_quantile : float in (0, 1), optional
        Sets ``threshold`` to reject that share of the samples instead (e.g. 0.05).
    higher_is_worse : bool, default True
        True for ``score`` (reject above the threshold), False for ``margin`` (reject below).
    bins : int, default 50
    log : bool, default False
        Logarithmic x axis (positive values only).
    xlabel, title : str, optional
    path : str or path-like, optional
        Write the figure there.
    dpi : int, default 100
        The figure is 6 x 3.5 inches.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.plotting import plot_score_histogram
    >>> scores = np.random.default_rng(0).gamma(2.0, size=500)
    >>> fig = plot_score_histogram(scores, reject_quantile=0.05)
    >>> fig.axes[0].get_legend().get_texts()[0].get_text()
    'rejected: 25 of 500 (5.0%)'
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError("values: empty")
    fin = np.isfinite(v)
    if reject_quantile is not None:
        if threshold is not None:
            raise ValueError("give threshold or reject_quantile, not both")
        qr = float(reject_quantile)
        if not 0.0 < qr < 1.0:
            raise ValueError(f"reject_quantile: must be in (0, 1), got {reject_quantile}")
        n_rej = int(round(qr * v.size))
        srt = np.sort(np.where(fin, v, np.inf if higher_is_worse else -np.inf))
        if higher_is_worse:
            threshold = srt[v.size - n_rej - 1] if n_rej < v.size else -np.inf
        else:
            threshold = srt[n_rej] if n_rej < v.size else np.inf
    fig = _figure((6.0, 3.5), dpi)
    ax = fig.subplots()
    data = v[fin]
    if log:
        data = data[data > 0]
        if data.size:
            edges = np.geomspace(data.min(), data.max() * (1 + 1e-12), bins + 1)
            ax.hist(data, bins=edges, color="0.55")
        ax.set_xscale("log")
    else:
        ax.hist(data, bins=bins, color="0.55")
    if threshold is not None:
        rej = (v > threshold) if higher_is_worse else (v < threshold)
        rej |= ~fin if higher_is_worse else np.zeros_like(fin)
        k = int(rej.sum())
        ax.axvline(threshold, color="C3", ls="--",
                   label=f"rejected: {k} of {v.size} ({k / v.size:.1%})")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("samples")
    n_inf = int((~fin).sum())
    ax.set_title(title or (f"{v.size} samples" + (f" ({n_inf} non-finite, not drawn)"
                                                   if n_inf else "")), fontsize=10)
    fig.tight_layout()
    return _save(fig, path, dpi)

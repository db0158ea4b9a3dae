"""Peak memory of a fit, and the quality of a fit on a fixed problem."""
import functools

from .common import SIZES, problem, warm_up


def _fit(size, max_iter):
    from ntnumba import NTClustering
    pb = problem(size)
    p = pb.p
    model = NTClustering(p.n_clusters, n_components=p.n_components, n_similarity=p.n_similarity,
                         max_iter=max_iter, tol=0, random_state=0)
    return model.fit(pb.X), pb.y


class Fit:
    """A fit of a fixed number of iterations (3) from a fixed seed."""
    params = [SIZES]
    param_names = ["size"]
    timeout = 1200

    def setup(self, size):
        warm_up()
        problem(size)

    def peakmem_fit(self, size):
        _fit(size, 3)


@functools.lru_cache(maxsize=None)
def _quality(size):
    from ntnumba.metrics import clustering_accuracy
    model, y = _fit(size, 5)
    return (float(model.objective_history_[-1]), float(clustering_accuracy(y, model.labels_)))


class Quality:
    """Objective and clustering accuracy after 5 iterations (fixed seed)."""
    params = [SIZES]
    param_names = ["size"]
    timeout = 1200

    def setup(self, size):
        warm_up()
        self.result = _quality(size)

    def track_objective(self, size):
        return self.result[0]
    track_objective.unit = "objective"

    def track_clustering_accuracy(self, size):
        return self.result[1]
    track_clustering_accuracy.unit = "CA"

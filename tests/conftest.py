import os
import sys

import pytest
from hypothesis import settings

# make tests/naive*.py importable as plain modules
sys.path.insert(0, os.path.dirname(__file__))

# CI runs the property tests with a fixed seed (reproducible runs); locally they explore.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def memory_trace(monkeypatch):
    """``trace(run)`` -> ``(peak, estimates, result)``: the traced peak of ``run()``
    (tracemalloc) and the bytes its memory checks (``ntnumba.partition.graph.check_memory``, still
    checking) estimated."""
    import tracemalloc

    from ntnumba.partition import graph as _graph

    check = _graph.check_memory

    def trace(run):
        estimates = []
        monkeypatch.setattr(_graph, "check_memory", lambda nbytes, what: (
            estimates.append(nbytes), check(nbytes, what)))
        tracemalloc.start()
        try:
            result = run()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            monkeypatch.setattr(_graph, "check_memory", check)
        return peak, estimates, result

    return trace

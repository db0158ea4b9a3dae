"""Benchmarks and reproductions of ntnumba, run from a source checkout (not installed).

From the repository root::

    python -m benchmarks.reproduce                # the paper's tables against scikit-learn
    python -m benchmarks.reproduce --quick        # a smoke run on the shipped demo data
    python -m benchmarks.reproduce --suite dev    # the development suite (held-out data)
    python -m benchmarks.bench                    # kernels beside the NumPy reference and peers
    python -m benchmarks.bench_large              # the default fit on large data beside peers

``benchmarks.reference`` is the plain NumPy reference of one iteration (the tests compare
the kernels with it), ``benchmarks.stages`` the timed problems (shared with the asv suite of
``asv_bench/``) and ``benchmarks.common`` what the commands share. The harness uses the
public API of ntnumba only, except the graph rows of ``reproduce``'s k-NN table
(``reproduce._graph_rows``), which have no public equivalent.
"""

"""What the first default fit compiles, kernel by kernel: run it in a fresh interpreter with an
empty numba cache, from the repository root::

    NUMBA_CACHE_DIR=$(mktemp -d) python -m benchmarks.compile_profile [float64|float32] [N]

``NTClustering(20, random_state=0).fit`` of the demo data (``load_demo()``, 1440 x 1024) in the
given dtype, then the same fit again (all compiled). Prints the processor time of both fits
and their difference (the compilation, cache writes included), what the fit's ``verbose``
report says it compiled, and the ``N`` (default 25; 0: the two fits alone, without the
hooks) kernels of largest own compile time: processor time of the compiling thread from
numba's ``"numba:compile"`` event to its end, less the kernels compiled inside it (callees),
and the part of it spent in LLVM (llvmlite calls). ``numba:NAME``: numba's own
implementations (``np.empty`` ...), compiled once per signature and caller's options.
Records: ``docs/research/first-call-compile.md``.

``record FILE``: the signatures of the kernels the default float64 fit compiles (its
CPython-callable ones), pickled; ``compile FILE`` (fresh interpreter, empty cache): compiles
them in one thread, the steadiest figure under load (no fit, no thread pool).
"""
import contextlib
import io
import re
import sys
import threading
import time

from llvmlite.binding import ffi
from numba.core import event

_TLS = threading.local()
ROWS = {}   # name -> [own s, own LLVM s, compilations]


class _Profile(event.Listener):
    def on_start(self, ev):
        _TLS.__dict__.setdefault("stack", []).append([time.thread_time(), 0.0, 0.0])

    def on_end(self, ev):
        start, inner, llvm = _TLS.stack.pop()
        dt = time.thread_time() - start
        if _TLS.stack:
            _TLS.stack[-1][1] += dt
        f = ev.data["dispatcher"].py_func
        mod = f.__module__
        name = (f"{mod.rsplit('.', 1)[-1]}.{f.__name__}" if mod.startswith("ntnumba")
                else f"numba:{f.__name__}")
        row = ROWS.setdefault(name, [0.0, 0.0, 0])
        row[0] += dt - inner
        row[1] += llvm
        row[2] += 1


_call = ffi._lib_fn_wrapper.__call__


def _timed_call(self, *args, **kwargs):   # LLVM time of the innermost compilation
    t = time.thread_time()
    try:
        return _call(self, *args, **kwargs)
    finally:
        stack = _TLS.__dict__.get("stack")
        if stack:
            stack[-1][2] += time.thread_time() - t


def main(dtype="float64", top=25):
    if top:   # N = 0: the two fits alone, without the profiling hooks
        ffi._lib_fn_wrapper.__call__ = _timed_call
        event.register("numba:compile", _Profile())
    import ntnumba
    from ntnumba.datasets import load_demo
    X = load_demo()[0].astype(dtype)
    err = io.StringIO()
    t = time.process_time()
    with contextlib.redirect_stderr(err):
        ntnumba.NTClustering(20, random_state=0, verbose=1).fit(X)
    first = time.process_time() - t
    t = time.process_time()
    ntnumba.NTClustering(20, random_state=0).fit(X)
    second = time.process_time() - t
    said = re.search(r"and (\S+) compiling", err.getvalue())
    print(f"{dtype}: first fit {first:.1f} s, second {second:.1f} s (processor time): "
          f"compilation {first - second:.1f} s; the fit's report: "
          f"{said.group(1) if said else 'nothing'} compiling")
    if not top:
        return
    own = sum(r[0] for r in ROWS.values())
    print(f"{len(ROWS)} kernels, {sum(r[2] for r in ROWS.values())} compilations, "
          f"{own:.1f} s own compile time ({sum(r[1] for r in ROWS.values()):.1f} s LLVM)")
    print(f"{'kernel':32s} {'own s':>6s} {'LLVM s':>6s} {'count':>5s}")
    for name, (s, llvm, n) in sorted(ROWS.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{name:32s} {s:6.2f} {llvm:6.2f} {n:5d}")


def record(path):
    """The default fit, then ``(module, name, signature)`` of every kernel with a CPython
    wrapper it compiled, pickled to ``path`` (for :func:`compile_recorded`)."""
    import gc
    import pickle
    import ntnumba
    from ntnumba.datasets import load_demo
    from numba.core.registry import CPUDispatcher
    ntnumba.NTClustering(20, random_state=0).fit(load_demo()[0])
    out = [(d.py_func.__module__, d.py_func.__name__, sig) for d in gc.get_objects()
           if isinstance(d, CPUDispatcher) and d.py_func.__module__.startswith("ntnumba")
           and not d.targetoptions.get("no_cpython_wrapper") for sig in d.signatures]
    with open(path, "wb") as f:
        pickle.dump(out, f)
    print(f"{len(out)} kernels recorded in {path}")


def compile_recorded(path):
    """Compile the kernels of :func:`record` (callees with them) in this thread, after a
    warm-up compilation: processor time, without the fit's other work and threads."""
    import importlib
    import pickle
    import numpy as np
    from numba import njit
    with open(path, "rb") as f:
        sigs = pickle.load(f)
    njit(lambda a: a[0] + 1.0)(np.ones(2))   # numba's own first-compilation set-up
    t = time.process_time()
    model = 0.0
    for mod, name, sig in sorted(sigs, key=lambda x: ".model." in x[0]):  # partitions first
        t1 = time.process_time()
        getattr(importlib.import_module(mod), name).compile(sig)
        model += (time.process_time() - t1) if ".model." in mod else 0.0
    print(f"{len(sigs)} kernels compiled in {time.process_time() - t:.2f} s, "
          f"those of ntnumba.model (Stage 1, 2, quartic) in {model:.2f} s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["record"]:
        record(sys.argv[2])
    elif sys.argv[1:2] == ["compile"]:
        compile_recorded(sys.argv[2])
    else:
        main(*(sys.argv[1:2] or ["float64"]), *[int(a) for a in sys.argv[2:3]])

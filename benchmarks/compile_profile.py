"""What the first default fit compiles, kernel by kernel: run it in a fresh interpreter with an
empty numba cache, from the repository root::

    NUMBA_CACHE_DIR=$(mktemp -d) python -m benchmarks.compile_profile [float64|float32] [N]

``NTClustering(20, random_state=0).fit`` of the demo data (``load_demo()``, 1440 x 1024) in the
given dtype, then the same fit again (all compiled). Prints the processor time of both fits
and their difference (the compilation, cache writes included), what the fit's ``verbose``
report says it compiled, and the ``N`` (default 25) kernels of largest own compile time:
processor time of the compiling thread from numba's ``"numba:compile"`` event to its end,
less the kernels compiled inside it (callees), and the part of it spent in LLVM (llvmlite
calls). ``numba:NAME``: numba's own implementations (``np.empty`` ...), compiled once per
signature and process. Records: ``docs/research/first-call-compile.md``.
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
    own = sum(r[0] for r in ROWS.values())
    print(f"{len(ROWS)} kernels, {sum(r[2] for r in ROWS.values())} compilations, "
          f"{own:.1f} s own compile time ({sum(r[1] for r in ROWS.values()):.1f} s LLVM)")
    print(f"{'kernel':32s} {'own s':>6s} {'LLVM s':>6s} {'count':>5s}")
    for name, (s, llvm, n) in sorted(ROWS.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{name:32s} {s:6.2f} {llvm:6.2f} {n:5d}")


if __name__ == "__main__":
    main(*(sys.argv[1:2] or ["float64"]), *[int(a) for a in sys.argv[2:3]])

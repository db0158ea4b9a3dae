"""First-call compilation of every kernel (numba-benchmark's bench_compiling.py in spirit).

Measured in a fresh interpreter (the JIT state of the benchmark process is not cold): the first
call minus the second call of Stage 1 (float64 and float32), Stage 2 and a small fit (the rest).
"""


class Compile:
    timeout = 900

    def setup_cache(self):
        from ntnumba.bench import _COMPILE, _subprocess
        return _subprocess(_COMPILE)

    def track_compile_all_kernels(self, result):
        return result["total"]
    track_compile_all_kernels.unit = "seconds"

    def track_compile_stage1_float64(self, result):
        return result["stage1_float64"]
    track_compile_stage1_float64.unit = "seconds"

    def track_import(self, result):
        return result["import"]
    track_import.unit = "seconds"

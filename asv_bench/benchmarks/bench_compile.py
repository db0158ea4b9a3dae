"""First-call compilation of every kernel (numba-benchmark's bench_compiling.py in spirit).

Measured in fresh interpreters (the JIT state of the benchmark process is not cold): the first
call minus the second call of Stage 1 (float64 and float32), Stage 2 and a small fit (the rest),
once with an empty numba cache (cold: everything compiles and the cache is written) and once in
a second interpreter that loads the kernels from that cache (``compile_times`` of the
repository's ``benchmarks/stages.py``).
"""


class Compile:
    timeout = 900

    def setup_cache(self):
        from .common import stages
        cold, cached = stages.compile_times()
        return {"cold": cold, "cached": cached}

    def track_compile_all_kernels(self, result):
        return result["cold"]["total"]
    track_compile_all_kernels.unit = "seconds"

    def track_compile_stage1_float64(self, result):
        return result["cold"]["stage1_float64"]
    track_compile_stage1_float64.unit = "seconds"

    def track_first_call_from_cache(self, result):
        return result["cached"]["total"]
    track_first_call_from_cache.unit = "seconds"

    def track_import(self, result):
        return result["cold"]["import"]
    track_import.unit = "seconds"

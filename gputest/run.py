#!/usr/bin/env python3
"""GPU test suite for gpurr: runs each workload under gputest/workloads bare, then under
`gpurr record`, and checks the recording with `gpurr query ... --format json`.

Every test prints one line, PASS/FAIL/SKIP NAME: reason. Exit status 1 if any test failed.
Stdlib only; needs a CUDA machine with the workloads' Python packages and a built bin/.

  python3 gputest/run.py [--only PATTERN] [--part K/N] [--bare-only] [--raw-cuda-bin PATH] [--tmp DIR]
  python3 gputest/run.py --list [--only PATTERN] [--part K/N]   # the names, in run order

GPURR_RESULTS=path writes a JSON summary there. Logs of every run go to TMP/logs.

This file is the entry point: it names the capability modules and the order their tests run
in. harness.py holds the runner, the @test registry and the helpers tests share; each module
of CAPABILITIES holds one capability's tests. A new test is a function with @test("NAME")
in its capability's module and NAME in ORDER.
"""
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the modules beside this file, also under -m
import harness

# Each module registers its tests with @test as it is imported.
CAPABILITIES = ["cli", "record", "options", "nvtx", "frameworks", "callstacks", "multigpu", "race", "probe",
                "diff", "memory", "nan", "replay", "perfetto", "xla", "copies"]

# The order the tests run in, and --list prints: a test's place decides its share under --part
# and whether it runs before --budget is spent. Each registered test is named once (the runner
# exits 2 naming what is missing, unknown or twice).
ORDER = [
    "cli.unknown_command", "cli.query_missing_recording",
    "exit_code",
    "eager.python_line",
    "wheel.record",
    "eager.callstack", "eager.cublas",
    "threads_streams.launches", "threads_streams.activity",
    "nvtx.jax", "nvtx.ranges", "nvtx.start_end", "nvtx.trace_info", "nvtx.before_cuda", "nvtx.injection_kept",
    "graphs.capture", "graphs.replay_lines", "graphs.api_nodes",
    "triton",
    "compiled",
    "native.symbols_cpp", "native.symbols_go",
    "autograd.forward_lines", "autograd.nan_backward", "autograd.compiled",
    "cupy_raw",
    "torchrun_ranks",
    "demo.story",
    "race.planted", "race.correct", "race.roundtrip", "race.bad_input", "race.hang", "race.atomics",
    "race.triton_cta", "race.sides_shared", "race.sides_global", "race.sides_warp", "race.fatbin_ptx", "race.demo",
    "probe.slow_cta", "probe.live", "probe.runtime",
    "diff.torchrun",
    "digest.agree",
    "bisect.scatter", "bisect.step_range", "bisect.nan", "bisect.agree", "bisect.lr_ulp",
    "digest.nccl_owned",
    "bisect.ddp_scatter", "bisect.ddp_nan", "bisect.ddp_agree",
    "cudnn",
    "jax", "jax.lines",
    "raw_cuda",
    "fork_after_init",
    "sigkill",
    "sigterm",
    "hang",
    "profiler.beside",
    "multi_gpu",
    "options.kernels_filter", "options.callstack_native", "options.callstack_off",
    "options.gpu_timing_serial", "options.gpu_timing_sample", "options.gpu_timing_default",
    "steps.optimizer", "steps.range",
    "options.gpu_timing_off", "options.bad_flags",
    "cli.query_bad_sql",
    "memory.hash", "memory.hash_deferred", "memory.hash_deferred_stream",
    "writesets.proved", "writesets.chase", "writesets.learned_miss",
    "memory.snapshot", "memory.drop_oldest", "memory.ring_restart", "memory.disk_full",
    "memory.flight_sigusr2", "memory.flight_fault", "memory.flight_crash",
    "diff.scatter", "jax.diff_scatter", "jax.diff_scatter_prealloc",
    "writesets.diff_scatter_learned", "writesets.diff_scatter_deferred", "writesets.nan_learned",
    "diff.leftovers", "diff.threads_paired",
    "verify.rerun",
    "nan.planted", "nan.gpu_counts", "nan.counts_match_snapshots", "jax.nan", "jax.nan_prealloc", "jax.bisect", "jax.bisect_nan",
    "replay.transformer", "replay.extract", "replay.module", "replay.module_ptx", "replay.bad_input",
    "replay.streams_shared", "replay.cooperative", "replay.fault_fresh_context", "replay.big_operands", "replay.clocked_cubin", "jax.replay",
    "tune.gridstride",
    "trace.graphs", "trace.memcap",
    "copies.timeline", "copies.rewind_after_copy", "copies.nan_from_copy",
]


if __name__ == "__main__":
    for name in CAPABILITIES:
        importlib.import_module(name)
    sys.exit(harness.main(__doc__, ORDER))

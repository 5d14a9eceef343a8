"""JAX's own annotations, for the nvtx.jax GPU test: CALLS calls of a jitted function, each
inside jax.profiler.TraceAnnotation("gpurr_step N"), the function's ops inside
jax.named_scope("gpurr_scope"). XLA opens an NVTX range around each thunk it runs, naming the
op's scope, where an NVTX tool is injected, as under Nsight Systems; gpurr record injects its
agent as that tool. The TraceAnnotation ranges are a profiler TraceMe that JAX 0.11 does not
send to NVTX."""
import json
import sys

from jax_gpu import jax_on_gpu

CALLS = 20


def main():
    jax, jnp = jax_on_gpu()

    @jax.jit
    def step(x):
        with jax.named_scope("gpurr_scope"):
            return jnp.sin(x) * 2.0 + jnp.cos(x).sum()

    x = jnp.arange(1 << 16, dtype=jnp.float32)
    for i in range(CALLS):
        with jax.profiler.TraceAnnotation(f"gpurr_step {i}"):
            x = step(x)
            x.block_until_ready()
    if not bool(jnp.isfinite(x).all()):
        print("jax_nvtx: non-finite result", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "jax_nvtx", "calls": CALLS, "jax": jax.__version__}))


if __name__ == "__main__":
    main()

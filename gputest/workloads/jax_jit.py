"""A jitted JAX function on the GPU, called CALLS times (XLA launches its kernels through the
driver API; JAX may launch from its own threads)."""
import json
import sys

from jax_gpu import jax_on_gpu

CALLS = 50


def main():
    jax, jnp = jax_on_gpu()

    @jax.jit
    def step(x):
        return jnp.sin(x) * 2.0 + jnp.cos(x).sum()

    x = jnp.arange(1 << 16, dtype=jnp.float32)
    for _ in range(CALLS):
        x = step(x)  # MARK: jax-step
    x.block_until_ready()
    if not bool(jnp.isfinite(x).all()):
        print("jax_jit: non-finite result", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "jax_jit", "calls": CALLS}))


if __name__ == "__main__":
    main()

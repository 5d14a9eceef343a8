"""A jitted JAX training loop that takes the log of a negative at step 3: from then on the
loss is NaN. gpurr nan must name the kernel of the marked line, the first to write a NaN.

With --preallocate, JAX keeps its default memory preallocation (one large pool, here 5% of the
GPU's memory) instead of jax_gpu's XLA_PYTHON_CLIENT_PREALLOCATE=false."""
import json
import os
import sys

if "--preallocate" in sys.argv[1:]:
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"
    os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "0.05"

from jax_gpu import jax_on_gpu

STEPS = 5


def main():
    jax, jnp = jax_on_gpu()
    kw, kx = jax.random.split(jax.random.PRNGKey(0))
    w = jax.random.normal(kw, (64, 64)) * 0.1
    x = jax.random.normal(kx, (32, 64))

    @jax.jit
    def step(w, s):
        loss = jnp.mean(jnp.tanh(x @ w) ** 2)
        loss = loss + jnp.log(jnp.where(s == 3, -1.0, 1.0))  # MARK: jax-log
        return w * 0.99, loss

    losses = []
    for s in range(STEPS):
        w, loss = step(w, s)
        losses.append(float(loss))
    print(json.dumps({"workload": "jax_nan", "steps": STEPS, "nan_from": next(i for i, l in enumerate(losses) if l != l),
                      "losses": [l if l == l else "nan" for l in losses], "varies": ["losses"]}))


if __name__ == "__main__":
    main()

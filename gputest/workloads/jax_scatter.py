"""A jitted JAX step whose one nondeterministic kernel is a float scatter-add with many
colliding indices (x.at[idx].add(y): the atomics' order changes the sums' rounding run to run);
everything before it is deterministic. Two recordings must part ways at the scatter-add, at its
marked line.

With --preallocate, JAX keeps its default memory preallocation (one large pool, here 5% of the
GPU's memory, so that hashing it after each launch stays quick) instead of jax_gpu's
XLA_PYTHON_CLIENT_PREALLOCATE=false.

Exits 3 (cannot run here) when two runs of the scatter-add in this process give the same bits:
an XLA that makes scatter deterministic (a determinism expander, or deterministic ops asked for).

With --plant-from K (for gpurr bisect: its steps are the runs of the jitted step, --step-range
'hlo_module=jit_step,') the loop runs STEPS steps, the scatter-add only from step K on (before
it the step takes zeros): two runs part ways in step K, where the scatter is also compiled. No
scatter runs before it, not even the check above, whose outputs would stay in memory the step
digests hash: run the script without --plant-from first to know it can run here. XLA's
autotuner is off then (--xla_gpu_autotune_level=0, added to XLA_FLAGS): timing candidates, it
may pick another kernel for the step's matrix product in another run, and the runs would part
ways there, in step 0.

Usage: jax_scatter.py [--preallocate] [--plant-from K]"""
import json
import os
import sys

if "--preallocate" in sys.argv[1:]:
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"
    os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "0.05"

from jax_gpu import jax_on_gpu  # noqa: E402

BINS, N = 64, 1 << 20
PLANT_FROM = int(sys.argv[sys.argv.index("--plant-from") + 1]) if "--plant-from" in sys.argv[1:] else None
STEPS = 3 if PLANT_FROM is None else 5
if PLANT_FROM is not None:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_autotune_level=0").strip()


def main():
    jax, jnp = jax_on_gpu()
    kx, ki, kw = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.normal(kx, (N,))
    idx = jax.random.randint(ki, (N,), 0, BINS)
    w = jax.random.normal(kw, (BINS, BINS))

    @jax.jit
    def scatter(x, idx):
        y = jax.nn.relu(x * 2)
        return jnp.zeros((BINS,)).at[idx].add(y)  # MARK: jax-scatter

    @jax.jit
    def step(x, acc):
        out = jnp.tanh(w @ acc)
        return x + 1e-3 * out.sum()

    if PLANT_FROM is None:
        a, b = scatter(x, idx), scatter(x, idx)
        if bool((a == b).all()) and bool((scatter(x, idx) == a).all()):
            print("SKIP: XLA's scatter-add gave the same bits in three runs: deterministic here", flush=True)
            sys.exit(3)
    zeros = jnp.zeros((BINS,))
    for s in range(STEPS):
        x = step(x, scatter(x, idx) if PLANT_FROM is None or s >= PLANT_FROM else zeros)
    x.block_until_ready()
    print(json.dumps({"workload": "jax_scatter", "preallocate": "--preallocate" in sys.argv[1:], "plant_from": PLANT_FROM,
                      "steps": STEPS, "checksum": float(x.sum()), "varies": ["checksum"]}))


if __name__ == "__main__":
    main()

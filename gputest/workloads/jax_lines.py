"""A jitted JAX training step (value_and_grad of a tanh MLP), STEPS steps: each kernel XLA
launches for the step is attributed, through the HLO dump gpurr record has XLA write, to the
line of the step it computes, each marked with a MARK comment.

With --no-command-buffer, XLA runs the step kernel by kernel, not as a CUDA graph it builds
node by node (XLA_FLAGS --xla_gpu_enable_command_buffer=, added to the flags gpurr record set):
every kernel of the step is then a launch, which a snapshot can cover and replay can run."""
import json
import os
import sys

if "--no-command-buffer" in sys.argv[1:]:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_enable_command_buffer=").strip()

from jax_gpu import jax_on_gpu  # noqa: E402

STEPS = 5


def main():
    jax, jnp = jax_on_gpu()
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(0), 4)
    p = {"w1": jax.random.normal(k1, (256, 512)) * 0.05, "w2": jax.random.normal(k2, (512, 10)) * 0.05}
    x = jax.random.normal(k3, (128, 256))
    y = jax.random.normal(k4, (128, 10))

    def loss_fn(p, x, y):
        h = jnp.tanh(x @ p["w1"])  # MARK: jax-hidden
        out = h @ p["w2"]  # MARK: jax-out
        return jnp.mean((out - y) ** 2)  # MARK: jax-loss

    @jax.jit
    def step(p, x, y):
        l, g = jax.value_and_grad(loss_fn)(p, x, y)  # MARK: jax-grad
        return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), l  # MARK: jax-update

    losses = []
    for _ in range(STEPS):
        p, l = step(p, x, y)
        losses.append(float(l))
    # Autotuning may pick another gemm from run to run, rounding otherwise: the losses may vary.
    print(json.dumps({"workload": "jax_lines", "steps": STEPS, "losses": losses, "varies": ["losses"]}))


if __name__ == "__main__":
    main()

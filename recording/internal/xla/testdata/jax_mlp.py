"""A jitted tanh-MLP training step (value_and_grad), 5 steps; MODE=scatter plants a colliding
x.at[idx].add(y); MODE=nan plants jnp.log of a negative at step 3."""
import os, sys, json
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gputest", "workloads"))
from jax_gpu import jax_on_gpu
jax, jnp = jax_on_gpu()
MODE = os.environ.get("MODE", "")

def init(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (256, 512)) * 0.05, "w2": jax.random.normal(k2, (512, 10)) * 0.05}

def loss_fn(p, x, y, step):
    h = jnp.tanh(x @ p["w1"])
    if MODE == "scatter":
        idx = jnp.arange(h.shape[0] * 4) % 7
        h = h + jnp.zeros((7, h.shape[1])).at[idx].add(jnp.tile(h, (4, 1)) * 1.001).sum() * 1e-3
    out = h @ p["w2"]
    l = jnp.mean((out - y) ** 2)
    if MODE == "nan":
        l = l + jnp.log(jnp.where(step == 3, -1.0, 1.0))
    return l

@jax.jit
def step(p, x, y, s):
    l, g = jax.value_and_grad(loss_fn)(p, x, y, s)
    return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), l

p = init(jax.random.PRNGKey(0))
x = jax.random.normal(jax.random.PRNGKey(1), (128, 256))
y = jax.random.normal(jax.random.PRNGKey(2), (128, 10))
losses = []
for s in range(5):
    p, l = step(p, x, y, s)
    losses.append(float(l))
print(json.dumps({"losses": losses}))

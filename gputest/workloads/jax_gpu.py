"""What the JAX workloads share: JAX without its memory preallocation, on a GPU, or exit 3
(the harness's "cannot run here") saying why."""
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def jax_on_gpu():
    """Returns (jax, jax.numpy), or exits 3 when JAX is missing or sees no GPU."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print(f"jax not installed: {e}", file=sys.stderr)
        sys.exit(3)
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("jax sees no GPU", file=sys.stderr)
        sys.exit(3)
    return jax, jnp

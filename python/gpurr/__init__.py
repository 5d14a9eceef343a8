"""Read gpurr recordings from Python.

    import gpurr
    rec = gpurr.open("run1")
    rec.query("SELECT name, count(*) AS n FROM launches GROUP BY name ORDER BY n DESC")  # pandas
    rec.rows("SELECT count(*) AS n FROM launches")     # [{'n': 1165}], no pandas needed
    rec.launches, rec.gpu_activity                     # whole tables as DataFrames

This is not a second reader of the recording format: every call runs the gpurr binary that
ships in this package (`gpurr query --format json`), so what Python sees is what `gpurr query`
shows, with the same tables and columns (`gpurr query --schema`, docs/query.md).
"""
import json
import os
import subprocess

__all__ = ["open", "Recording", "GpurrError", "binary", "__version__"]

__version__ = "@VERSION@"


class GpurrError(Exception):
    """A gpurr command failed; the message is its one-line error."""


def binary():
    """The path of the gpurr binary in this package (GPURR_BINARY overrides it)."""
    exe = os.environ.get("GPURR_BINARY") or os.path.join(os.path.dirname(__file__), "bin", "gpurr")
    if not os.access(exe, os.X_OK):
        raise GpurrError(f"no gpurr binary at {exe}: reinstall gpurr (pip install --force-reinstall gpurr)")
    return exe


def _run(args):
    p = subprocess.run([binary(), *args], capture_output=True, text=True)
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        raise GpurrError(lines[-1] if lines else f"gpurr {args[0]} exited {p.returncode}")
    return p.stdout


class Recording:
    """A recording directory (or one process of it), read through `gpurr query`."""

    def __init__(self, path):
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise GpurrError(f"{self.path}: not a directory (a recording is the directory gpurr record -o wrote)")

    def rows(self, sql):
        """The result of one SQL statement (read-only) as a list of dicts."""
        out = _run(["query", self.path, sql, "--format", "json"])
        return json.loads(out) if out.strip() else []

    def query(self, sql):
        """The result of one SQL statement (read-only) as a pandas DataFrame."""
        try:
            import pandas
        except ImportError as e:
            raise GpurrError("Recording.query needs pandas (pip install pandas); Recording.rows needs nothing") from e
        rows = self.rows(sql)
        return pandas.DataFrame.from_records(rows)

    def table(self, name):
        """A whole table as a DataFrame: launches, kernels, gpu_activity, ... (gpurr query --tables)."""
        if not name.isidentifier():
            raise GpurrError(f"{name!r} is not a table name (gpurr query --tables lists them)")
        return self.query(f"SELECT * FROM {name}")

    @property
    def launches(self):
        return self.table("launches")

    @property
    def gpu_activity(self):
        return self.table("gpu_activity")

    @property
    def kernels(self):
        return self.table("kernels")

    @property
    def ranges(self):
        """The program's NVTX ranges, each with its path (step 5 / forward)."""
        return self.table("ranges")

    @property
    def probe_ctas(self):
        """Every CTA of every launch probed live (gpurr record --probe): launch, index and
        coordinates, start and end on the GPU's clock, SM, and the count of the instructions
        --probe counted."""
        return self.table("probe_ctas")

    def __repr__(self):
        return f"gpurr.Recording({self.path!r})"


def open(path):  # noqa: A001 - gpurr.open reads as the verb it is
    """Open the recording at path."""
    return Recording(path)

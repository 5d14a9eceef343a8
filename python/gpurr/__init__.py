"""Read gpurr recordings from Python.

    import gpurr
    rec = gpurr.open("run1")
    rec.query("SELECT name, count(*) AS n FROM launches GROUP BY name ORDER BY n DESC")  # pandas
    rec.rows("SELECT count(*) AS n FROM launches")     # [{'n': 1165}], no pandas needed
    rec.launches, rec.gpu_activity                     # whole tables as DataFrames
    gpurr.table(rec, "launches")                       # a large table as a pyarrow.Table (Parquet)

This is not a second reader of the recording format: every call runs the gpurr binary that
ships in this package (`gpurr query --format jsonl`, `gpurr export`), so what Python sees is
what `gpurr query` shows, with the same tables and columns (`gpurr query --schema`,
docs/query.md), whether it comes through SQL or through Parquet. What gpurr warns of (a recording cut short, damaged or lossy) comes as a
GpurrWarning and in the result's warnings; what fails raises GpurrError with gpurr's line.
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

__all__ = ["open", "table", "read_export", "Recording", "Rows", "GpurrError", "GpurrWarning", "binary",
           "EXPORT_TABLES", "__version__"]

__version__ = "@VERSION@"

# The tables gpurr export writes, in its order: gpurr query's, with the same columns
# (internal/export's Tables; a Go test keeps the two the same).
EXPORT_TABLES = ("processes", "devices", "modules", "kernels", "kernel_params", "launches", "gpu_activity",
                 "gpurr_activity", "copies", "syncs", "host_calls", "ranges", "callstacks", "frames", "graph_nodes", "graph_launches", "allocations",
                 "regions", "memory_states", "torn_states", "nan_counts", "memory_chunks", "write_set_misses", "digests",
                 "copy_states", "probe_kernels", "probe_launches", "probe_ctas", "log", "stats")


class GpurrError(Exception):
    """A gpurr command failed; the message is its one-line error ("gpurr: query: ...")."""


class GpurrWarning(UserWarning):
    """What gpurr warned of on stderr, one line each: a recording cut short, a damaged
    process left out, events lost while recording. The numbers are what was written."""


class Rows(list):
    """Recording.rows' result: a list of dicts, one per row, keyed by columns (a name the
    result repeats is suffixed _2, _3, ...), with gpurr's warnings about the recording."""

    def __init__(self, rows=(), columns=(), warnings=()):  # noqa: A002 - named as the attribute
        super().__init__(rows)
        self.columns = list(columns)
        self.warnings = list(warnings)


def binary():
    """The path of the gpurr binary in this package (GPURR_BINARY overrides it)."""
    exe = os.environ.get("GPURR_BINARY")
    if exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise GpurrError(f"gpurr: GPURR_BINARY={exe} is not an executable file: point it at a gpurr binary, "
                             "or unset it to use the packaged one")
        return exe
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "gpurr")
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise GpurrError(f"gpurr: no gpurr binary at {exe}: reinstall gpurr (pip install --force-reinstall gpurr)")
    return exe


def _checked_arg(verb, what, value):
    if "\0" in value:
        raise GpurrError(f"gpurr: {verb}: the {what} holds a NUL character, which no command line can carry")
    return value


def _run(verb, flags, args):
    """Runs gpurr VERB FLAGS -- ARGS; returns its stdout (bytes) and its stderr's lines, which
    on success are warnings. Every failure is a GpurrError with gpurr's line."""
    exe = binary()
    try:
        p = subprocess.run([exe, verb, *flags, "--", *args], capture_output=True, stdin=subprocess.DEVNULL)
    except (OSError, ValueError) as e:
        raise GpurrError(f"gpurr: {verb}: cannot run {exe}: {getattr(e, 'strerror', None) or e}") from None
    lines = [line for line in p.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    if p.returncode != 0:
        ours = [line for line in lines if line.startswith("gpurr: ")]
        if ours:
            raise GpurrError(ours[-1])
        how = f"was killed by signal {-p.returncode}" if p.returncode < 0 else f"exited {p.returncode}"
        raise GpurrError(f"gpurr: {verb}: {exe} {how}" + (f": {lines[-1]}" if lines else ""))
    return p.stdout, lines


def _warn(lines):
    """Warns of each line as a GpurrWarning, pointing at the first caller outside gpurr."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "gpurr":
        level, frame = level + 1, frame.f_back
    for line in lines:
        warnings.warn(GpurrWarning(line), stacklevel=level)


def _clip(text, n=80):
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return text if len(text) <= n else text[:n] + "..."


def _typed(v):
    """A jsonl value: {"blob": HEX} is bytes, {"float": "+Inf"} a float; others are as JSON has them."""
    if type(v) is dict:
        if "blob" in v:
            return bytes.fromhex(v["blob"])
        return float(v["float"])
    return v


def _parse_jsonl(out, exe):
    """The columns and rows (lists) of gpurr query --format jsonl's output (docs/query.md)."""
    head, _, body = out.partition(b"\n")
    try:
        columns = json.loads(head)["columns"]
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise TypeError
        # A row is one line and no JSON value holds a raw line break: the lines joined by
        # commas are one array, read in one call.
        body = body.rstrip(b"\n")
        rows = json.loads(b"[" + body.replace(b"\n", b",") + b"]") if body else []
        if any(not isinstance(r, list) or len(r) != len(columns) for r in rows):
            raise TypeError
        if b"{" in body:
            rows = [[_typed(v) for v in r] for r in rows]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        shown = _clip(out.strip().splitlines()[0]) if out.strip() else "nothing"
        raise GpurrError(f"gpurr: query: {exe} printed what gpurr query --format jsonl does not: {shown} "
                         "(is GPURR_BINARY a gpurr of this package's version?)") from None
    return columns, rows


class Recording:
    """A recording directory (or one process of it), read through `gpurr query`."""

    def __init__(self, path):
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise GpurrError(f"gpurr: {self.path}: not a directory (a recording is the directory gpurr record -o wrote)")

    def _query(self, sql):
        if not isinstance(sql, str):
            raise TypeError(f"the SQL must be a str, not {type(sql).__name__}")
        out, lines = _run("query", ["--format", "jsonl"], [self.path, _checked_arg("query", "SQL", sql)])
        columns, rows = _parse_jsonl(out, binary())
        _warn(lines)
        return columns, rows, lines

    def rows(self, sql):
        """The result of one SQL statement (read-only) as a list of dicts (Rows: with columns
        and warnings). BLOBs are bytes, REALs floats (infinities included), NULL None."""
        columns, rows, lines = self._query(sql)
        return Rows((dict(zip(columns, r)) for r in rows), columns, lines)

    def query(self, sql):
        """The result of one SQL statement (read-only) as a pandas DataFrame; gpurr's warnings
        are also in its attrs["warnings"]."""
        try:
            import pandas
        except ImportError:
            raise GpurrError("gpurr: Recording.query needs pandas (pip install pandas); Recording.rows needs nothing") from None
        columns, rows, lines = self._query(sql)
        df = pandas.DataFrame.from_records(rows, columns=columns)
        df.attrs["warnings"] = lines
        return df

    def table(self, name):
        """A whole table as a DataFrame: launches, kernels, gpu_activity, ... (gpurr query --tables)."""
        if not name.isidentifier():
            raise GpurrError(f"gpurr: query: {name!r} is not a table name (gpurr query --tables lists them)")
        return self.query(f"SELECT * FROM {name}")

    def export(self, folder):
        """Writes the recording's tables as Parquet into folder (gpurr export -o: it must not
        exist or be empty) and returns its path; read_export(folder, name) reads one."""
        folder = os.fspath(folder)
        _warn(self._export(folder))
        return folder

    def _export(self, folder):
        flags = ["-o", _checked_arg("export", "folder", folder)]
        try:
            return _run("export", flags, [self.path])[1]
        except GpurrError as e:
            if "unknown shorthand flag: 'o'" not in str(e):
                raise
        return _run("export", ["--parquet", folder], [self.path])[1]  # a gpurr from before -o

    def arrow(self, name):
        """A table (EXPORT_TABLES: gpurr query's; docs/query.md lists their columns and types)
        as a pyarrow.Table, read from gpurr export's Parquet: for tables too large to come
        through gpurr query. Needs pyarrow; .to_pandas() makes a DataFrame. gpurr's warnings are also
        in its schema's metadata, b"gpurr.warnings" (a JSON list)."""
        _pyarrow(name)
        with tempfile.TemporaryDirectory(prefix="gpurr-export-") as tmp:
            lines = self._export(os.path.join(tmp, "tables"))
            t = read_export(os.path.join(tmp, "tables"), name)
        _warn(lines)
        meta = dict(t.schema.metadata or {})
        meta[b"gpurr.warnings"] = json.dumps(lines).encode()
        return t.replace_schema_metadata(meta)

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


def _pyarrow(name):
    """pyarrow, once name is known to be an export table; GpurrError when it is not installed."""
    if name not in EXPORT_TABLES:
        raise GpurrError(f"gpurr: export: no table {name!r}: export writes gpurr query's tables "
                         "(gpurr query --tables lists them)")
    try:
        import pyarrow
        import pyarrow.dataset
    except ImportError:
        raise GpurrError("gpurr: reading Parquet tables needs pyarrow (pip install pyarrow); "
                         "Recording.rows and Recording.query read through gpurr query") from None
    return pyarrow


def read_export(folder, name):
    """The table name of a folder gpurr export wrote, as a pyarrow.Table with the Parquet
    files' column types (gpurr query's columns), and host (string) and rank (int32, -1
    without RANK) from the partition folders, where the table has no column of the name
    (processes keeps its own rank, NULL without RANK). A table without rows has its
    columns; one the folder lacks (written by a gpurr that exported fewer tables) reads as a
    Table without rows or columns."""
    pa = _pyarrow(name)
    path = os.path.join(os.fspath(folder), name)
    if not os.path.isdir(os.fspath(folder)):
        raise GpurrError(f"gpurr: export: {os.fspath(folder)}: not a directory (the folder gpurr export -o wrote)")
    if not os.path.isdir(path):
        return pa.table({})
    try:
        columns = pa.dataset.dataset(path, format="parquet").schema.names
        keys = [(k, t) for k, t in (("host", pa.string()), ("rank", pa.int32())) if k not in columns]
        partitioning = pa.dataset.HivePartitioning(pa.schema(keys), segment_encoding="none")
        return pa.dataset.dataset(path, format="parquet", partitioning=partitioning).to_table()
    except (OSError, pa.ArrowException) as e:
        raise GpurrError(f"gpurr: export: {path}: {_clip(str(e), 200)}") from None


def table(rec, name):
    """An export table of a recording (a Recording or its path) as a pyarrow.Table: see
    Recording.arrow."""
    if not isinstance(rec, Recording):
        rec = Recording(rec)
    return rec.arrow(name)


def open(path):  # noqa: A001 - gpurr.open reads as the verb it is
    """Open the recording at path."""
    return Recording(path)


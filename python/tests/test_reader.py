"""Tests of the Python reader (python/gpurr) against the gpurr binary it runs.

scripts/test-wheel runs them on the installed wheel (make test); from the source tree:

    make && GPURR_BINARY=$PWD/bin/gpurr PYTHONPATH=python python3 -m unittest discover -v -s python/tests

Recordings are the committed ones (testdata/recordings), cut or spoilt in a temporary folder
the way a killed or damaged run leaves them. Tests that need pandas or pyarrow skip, saying
so, where they are not installed."""
import importlib.util
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings
from pathlib import Path
from unittest import mock

import gpurr

ROOT = Path(__file__).resolve().parents[2]
KILLED = ROOT / "testdata" / "recordings" / "killed"  # 501 launches; no end record
COMPLETE = ROOT / "testdata" / "recordings" / "torch-graphs"  # closed normally: no warning

HAVE_PANDAS = importlib.util.find_spec("pandas") is not None
HAVE_PYARROW = importlib.util.find_spec("pyarrow") is not None


def quiet(fn, *args):
    """fn(*args) with gpurr's warnings recorded, not shown: (result, warning messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args)
    return result, [str(w.message) for w in caught if issubclass(w.category, gpurr.GpurrWarning)]


class TempDir(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="gpurr-reader-test-"))
        self.addCleanup(shutil.rmtree, self.tmp)

    def copy(self, src, name):
        dst = self.tmp / name
        shutil.copytree(src, dst)
        return dst

    def program(self, name, body):
        """An executable shell script in the temporary folder."""
        path = self.tmp / name
        path.write_bytes(b"#!/bin/sh\n" + body)
        path.chmod(0o755)
        return str(path)


class Warnings(TempDir):
    """What gpurr warns of on stderr reaches Python: a GpurrWarning, and the result's warnings."""

    def test_incomplete(self):
        rec = gpurr.open(KILLED)
        with self.assertWarns(gpurr.GpurrWarning) as w:
            rows = rec.rows("SELECT count(*) AS n FROM launches")
        self.assertEqual(rows, [{"n": 501}])
        self.assertIn("recording incomplete", str(w.warning))
        self.assertEqual(w.filename, __file__)  # points at the caller's line, not gpurr's
        self.assertEqual(len(rows.warnings), 1, rows.warnings)
        self.assertRegex(rows.warnings[0], r"^gpurr: query: warning: vm-3995: recording incomplete")

    def test_truncated(self):
        rec = self.copy(KILLED, "truncated")
        events = rec / "vm-3995" / "events.gpurr"
        os.truncate(events, events.stat().st_size - 5)  # killed mid-write: the last frame cut short
        rows, said = quiet(gpurr.open(rec).rows, "SELECT count(*) AS n FROM launches")
        self.assertTrue(any("recording truncated" in s for s in said), said)
        self.assertTrue(any("recording truncated" in s for s in rows.warnings), rows.warnings)

    def test_damaged(self):
        rec = self.copy(KILLED, "damaged")
        shutil.copytree(COMPLETE / "vm-3951", rec / "vm-3951")
        (rec / "vm-3951" / "events.gpurr").write_bytes(b"garbage")  # a process that cannot be read
        rows, said = quiet(gpurr.open(rec).rows, "SELECT count(DISTINCT process) AS n FROM launches")
        self.assertEqual(rows, [{"n": 1}])
        self.assertTrue(any("vm-3951" in s and "reading the other processes" in s for s in said), said)

    def test_complete_says_nothing(self):
        with warnings.catch_warnings():
            warnings.simplefilter("error", gpurr.GpurrWarning)
            rows = gpurr.open(COMPLETE).rows("SELECT count(*) AS n FROM launches")
        self.assertEqual(rows.warnings, [])
        self.assertEqual(rows.columns, ["n"])

    @unittest.skipUnless(HAVE_PANDAS, "pandas is not installed")
    def test_dataframe_attrs(self):
        df, said = quiet(gpurr.open(KILLED).query, "SELECT count(*) AS n FROM launches")
        self.assertEqual(df.attrs["warnings"], said)
        self.assertEqual(len(said), 1)


class Columns(unittest.TestCase):
    """Every column of a result comes to Python, whatever its name."""

    def test_join_keeps_every_column(self):
        rec = gpurr.open(KILLED)
        on = "a.process = l.process AND a.launch_seq = l.seq"
        (joined,), _ = quiet(rec.rows, f"SELECT * FROM launches l JOIN gpu_activity a ON {on} LIMIT 1")
        (launch,), _ = quiet(rec.rows, "SELECT * FROM launches LIMIT 1")
        (run,), _ = quiet(rec.rows, "SELECT * FROM gpu_activity LIMIT 1")
        self.assertEqual(len(joined), len(launch) + len(run))
        self.assertEqual(joined["process"], joined["process_2"])
        self.assertEqual(joined["seq"], launch["seq"])

    def test_repeated_names(self):
        rows, _ = quiet(gpurr.open(KILLED).rows, "SELECT 1 AS a, 2 AS a, 3 AS a_2")
        self.assertEqual(rows, [{"a": 1, "a_3": 2, "a_2": 3}])
        self.assertEqual(rows.columns, ["a", "a_3", "a_2"])

    @unittest.skipUnless(HAVE_PANDAS, "pandas is not installed")
    def test_dataframe_columns(self):
        df, _ = quiet(gpurr.open(KILLED).query, "SELECT 1 AS a, 2 AS a")
        self.assertEqual(list(df.columns), ["a", "a_2"])
        empty, _ = quiet(gpurr.open(KILLED).query, "SELECT seq FROM launches WHERE 0")
        self.assertEqual(list(empty.columns), ["seq"])


class Values(TempDir):
    """Each value comes back as the Python type of its SQLite type."""

    def test_types(self):
        (row,), _ = quiet(gpurr.open(KILLED).rows,
                          "SELECT 1e999 AS inf, -1e999 AS ninf, x'00ff' AS blob, x'' AS none, 1.0 AS real, "
                          "7 AS int, '+Inf' AS text, '00ff' AS hex, NULL AS missing")
        self.assertEqual(row["inf"], math.inf)
        self.assertEqual(row["ninf"], -math.inf)
        self.assertEqual(row["blob"], b"\x00\xff")
        self.assertEqual(row["none"], b"")
        self.assertIs(type(row["real"]), float)
        self.assertIs(type(row["int"]), int)
        self.assertEqual(row["text"], "+Inf")
        self.assertEqual(row["hex"], "00ff")
        self.assertIsNone(row["missing"])

    def test_nan(self):
        # SQLite stores NaN as NULL, so only a program can print it: the reader reads it as jsonl says.
        exe = self.program("nan", b"""printf '{"columns":["x","y"]}\\n[{"float":"NaN"},{"float":"-Inf"}]\\n'\n""")
        with mock.patch.dict(os.environ, {"GPURR_BINARY": exe}):
            (row,) = gpurr.open(KILLED).rows("SELECT 1")
        self.assertTrue(math.isnan(row["x"]))
        self.assertEqual(row["y"], -math.inf)

    def test_params_are_bytes(self):
        rows, _ = quiet(gpurr.open(KILLED).rows, "SELECT params FROM launches WHERE seq = 1")
        self.assertIsInstance(rows[0]["params"], bytes)


class Failures(TempDir):
    """Every failure is a GpurrError with gpurr's line; arguments are never flags."""

    def assertFails(self, pattern, fn, *args):
        with self.assertRaises(gpurr.GpurrError) as e:
            quiet(fn, *args)
        self.assertRegex(str(e.exception), pattern)
        self.assertNotIn("\n", str(e.exception))

    def test_sql_is_not_a_flag(self):
        rec = gpurr.open(KILLED)
        self.assertFails(r"^gpurr: query: .*syntax error", rec.rows, "-1 AS a")
        rows, _ = quiet(rec.rows, "--x=1\nSELECT 7 AS n")
        self.assertEqual(rows, [{"n": 7}])

    def test_recording_named_like_a_flag(self):
        self.copy(KILLED, "--help")
        exe = mock.patch.dict(os.environ, {"GPURR_BINARY": os.path.abspath(gpurr.binary())})
        exe.start()
        self.addCleanup(exe.stop)
        cwd = os.getcwd()
        os.chdir(self.tmp)
        self.addCleanup(os.chdir, cwd)
        rows, _ = quiet(gpurr.open("--help").rows, "SELECT count(*) AS n FROM launches")
        self.assertEqual(rows, [{"n": 501}])

    def test_bad_sql(self):
        rec = gpurr.open(KILLED)
        self.assertFails(r"^gpurr: query: DROP is not allowed", rec.rows, "DROP TABLE launches")
        self.assertFails(r"^gpurr: query: the SQL holds a NUL", rec.rows, "SELECT 1\0")
        self.assertFails(r"^gpurr: .*: not a directory", gpurr.open, str(self.tmp / "absent"))

    def test_binary_is_a_directory(self):
        with mock.patch.dict(os.environ, {"GPURR_BINARY": str(self.tmp)}):
            self.assertFails(r"^gpurr: GPURR_BINARY=.* is not an executable file", gpurr.open(KILLED).rows, "SELECT 1")

    def test_binary_prints_no_json(self):
        exe = self.program("hello", b"echo hello\n")
        with mock.patch.dict(os.environ, {"GPURR_BINARY": exe}):
            self.assertFails(r"^gpurr: query: .*hello printed what gpurr query --format jsonl does not: hello",
                             gpurr.open(KILLED).rows, "SELECT 1")

    def test_binary_prints_nothing(self):
        exe = self.program("silent", b"exit 0\n")
        with mock.patch.dict(os.environ, {"GPURR_BINARY": exe}):
            self.assertFails(r"^gpurr: query: .* does not: nothing", gpurr.open(KILLED).rows, "SELECT 1")

    def test_stderr_not_utf8(self):
        exe = self.program("latin1", b"printf 'some trace\\n' >&2\nprintf 'gpurr: query: caf\\351\\n' >&2\nexit 2\n")
        with mock.patch.dict(os.environ, {"GPURR_BINARY": exe}):
            self.assertFails("^gpurr: query: caf\ufffd$", gpurr.open(KILLED).rows, "SELECT 1")

    def test_binary_fails_without_a_line(self):
        exe = self.program("crash", b"echo 'Segmentation fault' >&2\nexit 139\n")
        with mock.patch.dict(os.environ, {"GPURR_BINARY": exe}):
            self.assertFails(r"^gpurr: query: .*crash exited 139: Segmentation fault$", gpurr.open(KILLED).rows, "SELECT 1")

    def test_binary_cannot_run(self):
        exe = self.tmp / "not-a-program"
        exe.write_bytes(b"\x7fELF garbage")
        exe.chmod(0o755)
        with mock.patch.dict(os.environ, {"GPURR_BINARY": str(exe)}):
            self.assertFails(r"^gpurr: query: cannot run .*not-a-program: ", gpurr.open(KILLED).rows, "SELECT 1")

    def test_python_m_gpurr_without_binary(self):
        env = dict(os.environ, GPURR_BINARY=str(self.tmp / "absent"))
        p = subprocess.run([sys.executable, "-m", "gpurr", "--version"], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertRegex(p.stderr, r"^gpurr: GPURR_BINARY=.*absent is not an executable file[^\n]*\n$")


class Parquet(TempDir):
    """Large tables: gpurr export's Parquet, read with pyarrow."""

    def test_export(self):
        folder, said = quiet(gpurr.open(KILLED).export, self.tmp / "pq")
        self.assertEqual(Path(folder), self.tmp / "pq")
        self.assertTrue((self.tmp / "pq" / "launches" / "host=vm" / "rank=-1" / "vm-3995.parquet").is_file())
        self.assertTrue(any("recording incomplete" in s for s in said), said)

    def test_export_before_o(self):
        # A gpurr from before export -o knows only --parquet DIR.
        exe = self.program("old-export", b"""[ "$2" = --parquet ] && mkdir "$3" && exit 0
echo "gpurr: export: unknown shorthand flag: 'o' in -o (see gpurr export --help)" >&2; exit 2
""")
        with mock.patch.dict(os.environ, {"GPURR_BINARY": exe}):
            gpurr.open(KILLED).export(self.tmp / "pq")
        self.assertTrue((self.tmp / "pq").is_dir())

    def test_not_an_export_table(self):
        with self.assertRaisesRegex(gpurr.GpurrError, r"^gpurr: export: no table 'region_hashes': export writes gpurr query's tables"):
            gpurr.table(KILLED, "region_hashes")

    @unittest.skipIf(HAVE_PYARROW, "pyarrow is installed: test_table reads with it")
    def test_without_pyarrow(self):
        with self.assertRaisesRegex(gpurr.GpurrError, r"^gpurr: reading Parquet tables needs pyarrow \(pip install pyarrow\)"):
            gpurr.table(KILLED, "launches")

    @unittest.skipUnless(HAVE_PYARROW, "pyarrow is not installed")
    def test_table(self):
        import pyarrow as pa
        t, said = quiet(gpurr.table, str(KILLED), "launches")
        self.assertEqual(t.num_rows, 501)
        self.assertEqual(t.schema.field("seq").type, pa.int64())
        self.assertEqual(t.schema.field("captured").type, pa.bool_())
        self.assertEqual(t.schema.field("params").type, pa.binary())
        self.assertEqual(t.schema.field("host").type, pa.string())
        self.assertEqual(t.schema.field("rank").type, pa.int32())
        self.assertEqual(set(t.column("rank").to_pylist()), {-1})
        self.assertIn(b"gpurr.warnings", t.schema.metadata)
        self.assertTrue(any("recording incomplete" in s for s in said), said)
        states, _ = quiet(gpurr.table, KILLED, "memory_states")  # recorded without --memory: no rows
        self.assertEqual(states.num_rows, 0)
        self.assertIn("launch_seq", states.schema.names)
        folder, _ = quiet(gpurr.open(KILLED).export, self.tmp / "pq")
        self.assertEqual(gpurr.read_export(folder, "kernels").num_rows, 2)
        if HAVE_PANDAS:
            self.assertEqual(len(t.to_pandas()), 501)

    @unittest.skipUnless(HAVE_PYARROW, "pyarrow is not installed")
    def test_same_as_query(self):
        # Every column of a table, and its rows, are those gpurr query gives: one schema.
        rec = gpurr.open(KILLED)
        folder, _ = quiet(rec.export, self.tmp / "pq")
        for name in gpurr.EXPORT_TABLES:
            rows, _ = quiet(rec.rows, f"SELECT * FROM {name}")
            t = gpurr.read_export(folder, name)
            self.assertEqual(t.schema.names[:len(rows.columns)], rows.columns, name)
            partitions = [k for k in ("host", "rank") if k not in rows.columns]  # processes has its own rank
            self.assertEqual(t.schema.names[len(rows.columns):], partitions, name)
            self.assertEqual(t.num_rows, len(rows), name)
        (launch,), _ = quiet(rec.rows, "SELECT seq, captured, python_line, identity FROM launches WHERE seq = 1")
        (got,) = [r for r in gpurr.read_export(folder, "launches").to_pylist() if r["seq"] == 1]
        self.assertEqual({k: got[k] for k in launch}, dict(launch, captured=bool(launch["captured"])))


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env bash
# Records the training story's bundled recordings on a machine with a GPU, from the repository
# root, with bin/gpurr built (make) and a Python that imports torch:
#
#   PYTHON=/opt/torch/.venv/bin/python3 bash internal/demo/bundled/regen.sh OUTDIR
#
# It runs gpurr demo -o OUTDIR/demo, which records internal/demo/train.py twice with the
# flags and arguments it always uses and walks through the runs (its output: OUTDIR/demo.log),
# then zips the runs (a/, b/) into OUTDIR/train.zip, which must stay under 10 MiB. Copy that
# into the tree:
#
#   cp OUTDIR/train.zip internal/demo/bundled/train.zip
#
# The recordings name the script by the path it was recorded at, OUTDIR/demo/train.py: pick
# a short OUTDIR (/tmp/gpurr-demo).
set -euo pipefail

out=${1:?usage: bash internal/demo/bundled/regen.sh OUTDIR}
gpurr=${GPURR:-bin/gpurr}
if [ ! -x "$gpurr" ]; then
	echo "regen.sh: no $gpurr: build it with make first" >&2
	exit 2
fi
if [ -z "${PYTHON:-}" ]; then
	echo "regen.sh: set PYTHON to a Python that imports torch" >&2
	exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/demo" "$out/train.zip" "$out/demo.log"

PYTHON="$PYTHON" "$gpurr" demo -o "$out/demo" | tee "$out/demo.log"
# Without a GPU or torch, gpurr demo walks through what it ships, or records its own Go
# program: neither is what the binary should carry.
if ! grep -q '^Recording two runs of a small PyTorch training loop' "$out/demo.log"; then
	echo "regen.sh: gpurr demo did not record the training loop (see $out/demo.log)" >&2
	exit 1
fi

"$PYTHON" - "$out" $((10 << 20)) <<'PY'
import os
import sys
import zipfile

out, limit = sys.argv[1], int(sys.argv[2])
root = os.path.join(out, "demo")
archive = os.path.join(out, "train.zip")


def write(modules):
    with zipfile.ZipFile(archive, "w") as z:
        for run in ("a", "b"):
            for top, dirs, files in os.walk(os.path.join(root, run)):
                dirs.sort()
                for name in sorted(files):
                    path = os.path.join(top, name)
                    rel = os.path.relpath(path, root)
                    if not modules and rel.split(os.sep)[1] == "modules":
                        continue
                    if not os.path.isfile(path) or os.path.islink(path):
                        sys.exit(f"regen.sh: {path} is not a regular file")
                    # Fixed times and modes: the same recordings make the same archive.
                    info = zipfile.ZipInfo(rel, date_time=(2026, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = 0o644 << 16
                    with open(path, "rb") as f:
                        z.writestr(info, f.read(), compresslevel=9)
    return os.path.getsize(archive)


size = write(modules=True)
if size >= limit:
    # The walk reads no module image (replay, race and probe would; gpurr info notes the
    # missing ones): leave PyTorch's out rather than ship them in every binary.
    print(f"regen.sh: with the module images train.zip is {size} bytes; leaving out a/modules and b/modules")
    write(modules=False)
PY

size=$(stat -c %s "$out/train.zip")
if [ "$size" -ge $((10 << 20)) ]; then
	echo "regen.sh: $out/train.zip is $size bytes, over 10 MiB: it ships in every gpurr binary" >&2
	exit 1
fi
echo "regen.sh: wrote $out/train.zip ($size bytes); copy it into the tree:"
echo "  cp $out/train.zip internal/demo/bundled/train.zip"

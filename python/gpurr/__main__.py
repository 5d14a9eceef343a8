"""`gpurr` on PATH, and `python -m gpurr`: runs the gpurr binary that ships in this package."""
import os
import sys

from . import binary


def main():
    exe = binary()
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()

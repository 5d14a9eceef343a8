"""`gpurr` on PATH, and `python -m gpurr`: runs the gpurr binary that ships in this package."""
import os
import sys

from . import GpurrError, binary

EXIT_USAGE = 2  # gpurr's exit status for an input it cannot use (gpurr --help)


def main():
    try:
        exe = binary()
        try:
            os.execv(exe, [exe, *sys.argv[1:]])
        except (OSError, ValueError) as e:
            raise GpurrError(f"gpurr: cannot run {exe}: {getattr(e, 'strerror', None) or e}") from None
    except GpurrError as e:
        print(e, file=sys.stderr)
        sys.exit(EXIT_USAGE)


if __name__ == "__main__":
    main()

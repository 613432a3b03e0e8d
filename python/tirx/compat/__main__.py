"""``python -m tirx.compat SCRIPT [ARGS]``: runs SCRIPT with the ``tvm`` shim installed."""

import runpy
import sys

from . import install


def main() -> None:
    if len(sys.argv) < 2:
        print("usage: python -m tirx.compat SCRIPT [ARGS...]", file=sys.stderr)
        raise SystemExit(2)
    install()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()

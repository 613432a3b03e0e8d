"""The `tirx` command of the Python package: the same command line as the `tirx` binary
(`tirx lower`, `explain`, `sim`, `run`, ...), run in this process by the native module."""

import sys


def main() -> None:
    from . import _native

    sys.exit(_native.cli_main(["tirx", *sys.argv[1:]]))


if __name__ == "__main__":
    main()

"""`python -m tirx ...`: the `tirx` command (see `tirx._cli`)."""

from ._cli import main

main()

"""`python -m herd.cli`: the same as the `herd` command."""

from herd.cli import main

main()

"""`python -m herd`: the same as the `herd` command."""

from herd.cli import main

main()

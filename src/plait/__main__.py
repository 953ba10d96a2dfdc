"""`python -m plait` is the `plait` command."""

from plait.cli import main

main()

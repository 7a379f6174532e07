"""The command line: argument parsing into a RunConfig and the commands; nothing in emopipe imports it."""

from emopipe.cli.main import main

__all__ = ["main"]

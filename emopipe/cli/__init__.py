"""The command line: argument parsing into a RunConfig and the commands; nothing in emopipe imports it."""

from emopipe.cli.app import main

__all__ = ["main"]

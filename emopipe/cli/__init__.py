"""The command line: argument parsing into a RunConfig and the commands; nothing in emopipe imports it."""

from emopipe.cli.app import main, run_and_exit

__all__ = ["main", "run_and_exit"]

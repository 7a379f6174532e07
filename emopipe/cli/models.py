"""``emopipe models``: list, verify and download the model weights."""

from __future__ import annotations

import argparse
import logging

from emopipe.cli.parsing import new_parser
from emopipe.errors import UsageError, WeightsError

logger = logging.getLogger(__name__)


_EXIT_CODES = ("Exit codes: 0 ok, 2 bad options (also: an unknown model name), 6 weights problem (a download or "
               "verification failed, the manifest unreadable, the models directory a file).")


def build_parser() -> argparse.ArgumentParser:
    parser = new_parser("emopipe models", "List, verify and download the model weights. The files, their URLs and "
                        "checksums come from the project's manifest (models/manifest.json); $EMOPIPE_MANIFEST names "
                        "another (a mirror's URLs, models/README.md). " + _EXIT_CODES)
    where = ("models directory (default: $EMOPIPE_HOME, the checkout's models/, or $XDG_CACHE_HOME/emopipe, "
             "~/.cache/emopipe)")
    parser.add_argument("--models-dir", help=where)
    # (after the action too, as it is naturally typed: "emopipe models list --models-dir DIR")
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--models-dir", default=argparse.SUPPRESS, help=where)
    sub = parser.add_subparsers(dest="action", required=True)
    listing = "show each model file: present and verified, missing, or mismatching"
    sub.add_parser("list", parents=[after], help=listing, description=f"{listing[0].upper()}{listing[1:]}. "
                   "Exit codes: 0 the table was written (also with files missing or mismatching: it says which), "
                   "6 the manifest unreadable or the models directory a file.")
    fetching = "download (and verify) one model, or all of them (each is tried; the exit code is 6 if any failed)"
    fetch = sub.add_parser("fetch", parents=[after], help=fetching, description=f"{fetching[0].upper()}{fetching[1:]}. "
                           "Exit codes: 0 every file named is there and verified, 2 an unknown model name, 6 a "
                           "download or verification failed (the line says which URL to fetch by hand, and where "
                           "to put the file), or the manifest unreadable.")
    fetch.add_argument("names", nargs="*", help="manifest names (default: all)")
    fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def run(args: argparse.Namespace) -> int:
    from emopipe.model import weights

    directory = weights.models_dir(args.models_dir)
    entries = weights.load_manifest()
    if args.action == "list":
        if directory.exists() and not directory.is_dir():  # (every model would read as missing)
            raise WeightsError(f"the models directory {directory} is not a directory: a file is in its place")
        print(f"models directory: {directory}")
        print(f"{'name':<24} {'state':<9} {'file':<22} licence")
        for entry in entries.values():
            state = weights.status(entry, directory).state
            print(f"{entry.name:<24} {state:<9} {entry.file:<22} {entry.licence.split(':')[0]}")
        return 0
    names = args.names or list(entries)
    unknown = [n for n in names if n not in entries]
    if unknown:
        raise UsageError(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(entries)}")
    failed = []
    for name in names:  # each one tried: one failure does not keep the others from being fetched
        try:
            path = weights.ensure(name, directory, progress=not args.no_progress)
        except WeightsError as exc:
            if len(names) == 1:
                raise
            logger.error("error: %s", exc)
            failed.append(name)
            continue
        print(f"{name}: {path} (verified)")
    if failed:
        raise WeightsError(f"{len(failed)} of {len(names)} models not fetched ({', '.join(failed)}): see above")
    return 0

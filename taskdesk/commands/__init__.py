"""The `taskdesk` subcommands, one module each.

A module exposes `register(subparsers)`, which adds its parser and sets `func` (called with the
parsed arguments, returning the exit code). `taskdesk/cli.py` lists the modules in COMMANDS.
"""

from __future__ import annotations

import argparse
from typing import Any

# argparse's private _SubParsersAction is what add_subparsers() returns.
Subparsers = Any

DATA_DIR_HELP = (
    "folder where `taskdesk dev` keeps its private PostgreSQL and Redis; used only when "
    "DATABASE_URL or REDIS_URL is empty (default: $DATA_DIR, else .taskdesk)"
)


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)

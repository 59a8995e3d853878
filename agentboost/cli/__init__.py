"""The ``agentboost`` command line: one module per command group, each adding its commands' parsers
and holding their ``cmd_*`` functions, which parse, call the package and print. ``main`` turns bad
input (``InputError``) into one line on stderr and exit code 2, a run that cannot learn
(``RunFailed``) into one line and exit code 1, Ctrl-C into one line and exit code 130; any other
error keeps its traceback."""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..errors import InputError, RunFailed
from . import bench, continual, data, episodes, grading, init, jobs, models, rollout, serve, train
from .common import UsageError

__all__ = ["UsageError", "build_parser", "main"]

# in the order `agentboost --help` lists them
COMMANDS = (init.add_init, rollout.add_rollout, models.add_models, serve.add_serve, episodes.add_check, data.add_data,
            grading.add_score, episodes.add_stats, grading.add_sandbox, train.add_train, train.add_config, train.add_plot,
            train.add_export, serve.add_export_model, serve.add_ab, train.add_sft, train.add_eval, bench.add_bench,
            continual.add_continual, jobs.add_jobs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentboost", description="Train Strands Agents with reinforcement learning.")
    parser.add_argument("--version", action="version", version=f"agentboost {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as e:  # bad input (UsageError is one): one line; anything else keeps its traceback
        print(f"agentboost {args.command}: error: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:  # a run that cannot learn: named, one line, never "done"
        print(f"agentboost {args.command}: run failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: what finished is already on disk (episodes are written as they end)
        print(f"agentboost {args.command}: interrupted", file=sys.stderr)
        return 130

"""What the command groups share: the usage error, a command's parser, the --engine option, and
options given as a table."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ..errors import InputError


class UsageError(InputError):
    """A wrong combination of command-line options."""


ENGINES = ("hf", "vllm", "auto")  # sampling.policy_server.ENGINES, without importing the engines for --help
ENGINE_HELP = ("the engine that samples the model: hf (batched HF generate in this process), vllm (a vLLM "
               "server subprocess; install it with `bash setup.sh --vllm`), auto (vllm when installed) (default: hf)")


def add_command(sub, name: str, func: Callable[[argparse.Namespace], int], **kwargs: Any) -> argparse.ArgumentParser:
    """The parser of command ``name`` (``kwargs``: its help and description), run by ``func``."""
    parser = sub.add_parser(name, **kwargs)
    parser.set_defaults(func=func)
    return parser


def add_engine_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=ENGINES, default="hf", help=ENGINE_HELP)


def add_options(parser: argparse.ArgumentParser, *options: tuple[str, Any, str | None]) -> None:
    """Options that take one value, each ``(flag, default, help)``: the value's type is the
    default's; a type in place of the default means no default (None)."""
    for flag, default, help in options:
        kind = default if isinstance(default, type) else type(default)
        parser.add_argument(flag, type=None if kind is str else kind,
                            default=None if isinstance(default, type) else default, help=help)

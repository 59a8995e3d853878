"""The one progress bar: long work (rollouts, validation, supervised steps, ``rollout``) shows a rich
bar on stderr when it is a terminal, and nothing in logs, pipes and tests."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def progress_bar(label: str, total: int, transient: bool = True) -> Iterator[Callable[..., None]]:
    """``with progress_bar("validation", n) as advance: ... advance()`` (``advance(k)`` for k at once).
    ``transient``: the bar is gone when the work is done (the caller logs its own line)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=transient,
                  disable=not sys.stderr.isatty()) as progress:
        bar = progress.add_task(label, total=total)
        yield lambda k=1: progress.advance(bar, k)

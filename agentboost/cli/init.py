"""``init``: a starter project of one's own (``scaffold/project.py``)."""

from __future__ import annotations

from .common import add_command


def add_init(sub) -> None:
    p = add_command(sub, "init", cmd_init, help="write a small agent project that trains out of the box",
                    description="Write a small agent project into DIR: a shop assistant with two @tool functions "
                                "(tools.py), a reward (reward.py), train and test tasks (data/), a training "
                                "configuration with a warm start (config.yaml) and a README. "
                                "`agentboost train DIR/config.yaml` trains it on the embedded model.")
    p.add_argument("dir", metavar="DIR", help="the project directory (created; must be empty unless --force)")
    p.add_argument("--force", action="store_true", help="write into a non-empty DIR, replacing the project's files")


def cmd_init(args) -> int:
    from ..scaffold.project import write_project

    written = write_project(args.dir, force=args.force)
    for path in written:
        print(f"wrote {path}")
    print(f"next: agentboost train {args.dir}/config.yaml --run-dir {args.dir}/runs/first")
    return 0

"""``jobs serve``: the local job service."""

from __future__ import annotations

from .common import add_command


def add_jobs(sub) -> None:
    p = sub.add_parser("jobs", help="the local job service (start, status, cancel, evaluate, export over HTTP)",
                       description="Training jobs as child processes with their own run directories, driven over "
                                   "HTTP with a bearer token (see agentboost.jobs.client.TrainingClient).")
    jsub = p.add_subparsers(dest="jobs_cmd", metavar="COMMAND", required=True)
    s = add_command(jsub, "serve", cmd_jobs_serve, help="serve the jobs under --root",
                    description="Serve the jobs under --root; the bearer token is made at first start in "
                                "ROOT/token (owner-only).")
    s.add_argument("--root", default="jobs", help="jobs directory (default: jobs)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    s.add_argument("--port", type=int, default=8765)


def cmd_jobs_serve(args) -> int:
    from ..jobs.service import serve

    serve(args.root, args.host, args.port)
    return 0

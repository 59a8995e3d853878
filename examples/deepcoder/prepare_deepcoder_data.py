"""DeepCoder-Preview problems -> veRL rows for train_deepcoder_with_strands.sh.

    python examples/deepcoder/prepare_deepcoder_data.py --out ~/data/deepcoder_strands

For each config (DeepCoder's training mix by default: primeintellect, taco, lcbv5) agentboost's
``deepcoder`` preparer writes task files (``<out>/<config>/train.parquet``, ``test.parquet``: the
problem, its public and hidden tests); the tasks of all configs then become veRL rows in
``<out>/verl_train.parquet`` and ``<out>/verl_test.parquet`` with ``agent_name`` = the agent-loop
YAML's entry. Task ids and ``data_source`` carry the config, so validation metrics come per config.
Reading from Hugging Face needs the ``datasets`` package and network access; ``--source`` also
takes a local .jsonl/.parquet file in the dataset's format.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentboost.data.prepare import PrepareOptions, prepare
from agentboost.integrations.verl.dataset import write_verl_rows
from agentboost.tasks import load_tasks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--source", default="agentica-org/DeepCoder-Preview-Dataset",
                    help="Hugging Face dataset name or local file (default: %(default)s)")
    ap.add_argument("--configs", nargs="+", default=["primeintellect", "taco", "lcbv5"],
                    help="dataset configs to include (default: %(default)s)")
    ap.add_argument("--agent-name", default="strands_coder", help="the entry of agent_loop.yaml (default: %(default)s)")
    ap.add_argument("--test-fraction", type=float, default=0.05)
    ap.add_argument("--public-tests", type=int, default=1, help="tests per problem the agent may see and run")
    ap.add_argument("--limit", type=int, help="rows per config (for a quick look)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    out = Path(args.out).expanduser()
    splits: dict[str, list[dict]] = {"train": [], "test": []}
    for config in args.configs:
        opts = PrepareOptions(public_tests=args.public_tests, test_fraction=args.test_fraction, seed=args.seed,
                              limit=args.limit)
        report = prepare("deepcoder", out / config, source=args.source, config=config, opts=opts)
        print(f"{config}: read {report.read}, kept {report.kept}, rejected {sum(report.rejected.values())} "
              f"-> {report.train} train, {report.test} test")
        for split in splits:
            if (report.train if split == "train" else report.test) == 0:
                continue
            for task in load_tasks(out / config / f"{split}.parquet"):
                task["task_id"] = f"{config}-{task['task_id']}"
                task["data_source"] = f"deepcoder_{config}"
                splits[split].append(task)
    for split, tasks in splits.items():
        n = write_verl_rows(tasks, out / f"verl_{split}.parquet", agent_name=args.agent_name)
        print(f"wrote {n} veRL rows to {out / f'verl_{split}.parquet'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Math problems -> veRL rows for train_math_with_strands.sh.

    python examples/math/prepare_math_data.py --out ~/data/math_strands

agentboost's ``math`` preparer turns rows with a problem and an answer (or a solution with
``\\boxed{}`` / ``####``) into task files: the training source all into ``<out>/train/train.parquet``,
the test source all into ``<out>/test/test.parquet``; then both become veRL rows
(``<out>/verl_train.parquet``, ``<out>/verl_test.parquet``) with ``agent_name`` = the agent-loop
YAML's entry. Hugging Face sources need the ``datasets`` package and network access; local
.jsonl/.parquet files work everywhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentboost.data.prepare import PrepareOptions, prepare
from agentboost.integrations.verl.dataset import task_file_to_verl


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--train-source", default="agentica-org/DeepScaleR-Preview-Dataset",
                    help="Hugging Face dataset name or local file (default: %(default)s)")
    ap.add_argument("--train-split", default="train")
    ap.add_argument("--test-source", default="HuggingFaceH4/MATH-500",
                    help="Hugging Face dataset name or local file (default: %(default)s)")
    ap.add_argument("--test-split", default="test")
    ap.add_argument("--agent-name", default="strands_math", help="the entry of agent_loop.yaml (default: %(default)s)")
    ap.add_argument("--limit", type=int, help="rows per source (for a quick look)")
    args = ap.parse_args(argv)

    out = Path(args.out).expanduser()
    for split, source, source_split, fraction in (("train", args.train_source, args.train_split, 0.0),
                                                  ("test", args.test_source, args.test_split, 1.0)):
        report = prepare("math", out / split, source=source, split=source_split,
                         opts=PrepareOptions(test_fraction=fraction, limit=args.limit))
        print(f"{split} ({source}): read {report.read}, kept {report.kept}, "
              f"rejected {sum(report.rejected.values())}")
        n = task_file_to_verl(out / split / f"{split}.parquet", out / f"verl_{split}.parquet",
                              agent_name=args.agent_name)
        print(f"wrote {n} veRL rows to {out / f'verl_{split}.parquet'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

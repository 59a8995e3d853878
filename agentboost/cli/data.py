"""``data prepare`` and ``data verl``: datasets in the task schema, and veRL's rows."""

from __future__ import annotations

from pathlib import Path

from .common import add_command


def add_data(sub) -> None:
    from ..data.prepare import PREPARERS

    p = sub.add_parser("data", help="prepare datasets in the task schema", description="Prepare datasets.")
    dsub = p.add_subparsers(dest="data_cmd", metavar="COMMAND", required=True)
    prep = add_command(dsub, "prepare", cmd_data_prepare, help="convert a dataset to train.parquet / test.parquet",
                       description="Convert a dataset into the project's task schema. Datasets: "
                                   + "; ".join(f"{k}: {v.description}" for k, v in PREPARERS.items()))
    prep.add_argument("name", choices=sorted(PREPARERS), help="the dataset to prepare")
    prep.add_argument("--out", required=True, help="output directory")
    prep.add_argument("--source", help="local .json/.jsonl/.parquet file or Hugging Face dataset name")
    prep.add_argument("--config", help="dataset config (deepcoder: taco, lcbv5, primeintellect)")
    prep.add_argument("--split", default="train",
                      help="source split for Hugging Face datasets; tau2: train, test or base (default: train)")
    prep.add_argument("--domain", help="tau2: airline, retail or telecom")
    prep.add_argument("--category", help="bfcl: the category (simple_python, multiple, parallel, parallel_multiple, "
                                         "irrelevance, live_*, multi_turn_base, multi_turn_miss_func, "
                                         "multi_turn_miss_param, multi_turn_long_context)")
    prep.add_argument("--test-fraction", type=float, help="share of rows for test.parquet (default: per dataset)")
    prep.add_argument("--public-tests", type=int, default=1, help="tests per problem that become public examples (default: 1)")
    prep.add_argument("--show-example", action="store_true",
                      help="show the first public example in the question (it is then never graded)")
    prep.add_argument("--float-tol", help="how every row's real-number outputs compare: 'exact', a tolerance "
                                           "such as 1e-6, or '{\"abs\": 1e-6, \"rel\": 0}' (default: what the "
                                           "statement states, else the judge's default)")
    prep.add_argument("--drop-images", action="store_true",
                      help="reject problems whose statement has an image (default: keep them, flagged has_image)")
    prep.add_argument("--seed", type=int, default=0, help="seed of the train/test split (default: 0)")
    prep.add_argument("--limit", type=int, help="read at most this many rows")
    prep.add_argument("--verl-agent", metavar="NAME",
                      help="also write verl_train.parquet / verl_test.parquet: veRL rows run by this agent loop")
    vrl = add_command(dsub, "verl", cmd_data_verl, help="convert a task file to veRL dataset rows (parquet)",
                      description="Write veRL rows (prompt, agent_name, data_source, reward_model, extra_info "
                                  "with the task) for verl.trainer.main_ppo with the Strands agent loop.")
    vrl.add_argument("tasks", help="task file (.jsonl or .parquet)")
    vrl.add_argument("--out", required=True, help="output .parquet file")
    vrl.add_argument("--agent-name", default="strands_agent",
                     help="the agent loop's name in the agent-loop YAML (default: strands_agent)")
    vrl.add_argument("--question-field", default="question", help="task field holding the prompt (default: question)")
    vrl.add_argument("--id-field", default="task_id", help="task field holding the id (default: task_id)")


def cmd_data_prepare(args) -> int:
    from ..data.prepare import PrepareOptions, prepare

    opts = PrepareOptions(public_tests=args.public_tests, show_example=args.show_example,
                          test_fraction=args.test_fraction, seed=args.seed, limit=args.limit,
                          float_tol=args.float_tol, drop_images=args.drop_images, domain=args.domain,
                          category=args.category)
    report = prepare(args.name, args.out, source=args.source, config=args.config, split=args.split, opts=opts)
    if report.written:
        for path, n in report.written:
            print(f"wrote {n} tasks to {path}")
        return 0
    print("\n".join(report.summary(args.name, opts)))
    print(f"wrote {report.train} tasks to {Path(args.out) / 'train.parquet'} and {report.test} to "
          f"{Path(args.out) / 'test.parquet'}")
    if args.verl_agent:
        from ..integrations.verl.dataset import prepared_splits_to_verl

        for path, n in prepared_splits_to_verl(args.out, {"train": report.train, "test": report.test},
                                               agent_name=args.verl_agent):
            print(f"wrote {n} veRL rows to {path}")
    return 0


def cmd_data_verl(args) -> int:
    from ..integrations.verl.dataset import task_file_to_verl

    n = task_file_to_verl(args.tasks, args.out, agent_name=args.agent_name, question_field=args.question_field,
                          id_field=args.id_field)
    print(f"wrote {n} veRL rows to {args.out} (agent_name {args.agent_name})")
    return 0

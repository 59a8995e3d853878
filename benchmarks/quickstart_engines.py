"""The quickstart trained on the hf engine and on the vllm engine: wall time to docs/training.md's held-out
target (pass@1 at least 10 points over the base model), per seed, in one run.

Each (engine, seed) trains the quickstart (`examples/quickstart/config.yaml`: GRPO, LoRA r=16,
8 tasks x 4 per step) for --steps steps with no validation inside the run, and keeps the adapter as
it was after every --eval-every steps (`Trainer.run(after_step=...)`), with the wall time since the
trainer was created (model load, server start and worker start included; the copies' own time is
taken out). Then one evaluator measures every copy and the base model: a vLLM server with the
adapters put on it one after the other (merged into the weights), the quickstart's 100 held-out tasks x 2 samples at
temperature 0.7, the same seeds for every policy (common random numbers: every policy sees the same
random numbers for the same task, sample and call), so the curves of the two engines are comparable
point by point and their difference is the engines'. The target is reached at the first kept step
whose paired difference over the base model is >= +0.10 and stays so at the next kept step (one
crossing by noise does not count); evaluation of a run stops there, and its last step is always
evaluated. Reported: seconds to target per run, the hf/vllm ratio per seed, each run's final pass@1
with its 95% CI, and the paired difference (95% CI, p) at the target.

    .venv/bin/python benchmarks/quickstart_engines.py [--seeds 0,1] [--engines hf,vllm] [--steps 18]
        [--eval-every 3] [--eval-tasks N] [--out runs/quickstart_engines] [--eval-only | --reuse]

Needs the vllm engine installed (`bash setup.sh --vllm`). Runs alone on the machine for fair
figures (about an hour on 2 CPU cores with the defaults).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"
TARGET = 0.10


def train(engine: str, seed: int, steps: int, every: int, out: Path) -> dict:
    from agentboost.run.config import load_config
    from agentboost.trainer.loop import Trainer

    run_dir = out / f"{engine}_seed{seed}"
    cfg = load_config(str(QUICKSTART / "config.yaml"),
                      [f"run.seed={seed}", f"run.steps={steps}", "run.max_wall_s=0", "run.checkpoint_every=0",
                       "validation.at_start=false", "validation.every=0", "data.val_file=", f"rollout.engine={engine}"])
    kept: list[dict] = []
    copying = [0.0]

    def keep(trainer, m) -> None:
        if trainer.step % every and trainer.step != steps:
            return
        t = time.perf_counter()
        wall = t - t0 - copying[0]
        trainer.model.save_pretrained(str(run_dir / "kept" / f"step_{trainer.step:04d}"))
        copying[0] += time.perf_counter() - t
        kept.append({"step": trainer.step, "wall_s": wall, "trainer_elapsed_s": m["elapsed_s"],
                     "train_success_rate": m["success_rate"]})

    t0 = time.perf_counter()
    trainer = Trainer(cfg, run_dir, log=lambda line: print(f"[{engine} seed {seed}] {line}", flush=True))
    setup_s = time.perf_counter() - t0
    trainer.run(after_step=keep)
    record = {"engine": engine, "seed": seed, "setup_s": setup_s, "wall_s": time.perf_counter() - t0 - copying[0],
              "steps": steps, "kept": kept, "run_dir": str(run_dir)}
    (run_dir / "kept" / "timeline.json").write_text(json.dumps(record, indent=1))
    return record


def evaluate(records: list[dict], out: Path, eval_seed: int, max_tasks: int | None = None) -> dict:
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
    from safetensors.torch import load_file

    from agentboost.evaluation.evaluate import describe
    from agentboost.evaluation.statistics import paired_comparison
    from agentboost.models.loading import load_policy, resolve_model_path
    from agentboost.rewards.groups import apply_group_policy
    from agentboost.rollout.pool import StrandsProcessPool
    from agentboost.run.assembly import agent_spec, environment
    from agentboost.run.config import load_config
    from agentboost.sampling.protocol import SamplingParams
    from agentboost.sampling.spec import SamplerSpec
    from agentboost.sampling.vllm_server import VLLMPolicyServer, require_vllm_python
    from agentboost.tasks import load_tasks

    cfg = load_config(str(QUICKSTART / "config.yaml"), [])
    v = cfg.validation
    tasks = load_tasks(str(QUICKSTART / "data" / "test.jsonl"))[: max_tasks or v.max_tasks]
    model_dir = str(resolve_model_path(cfg.model.path))
    model, _ = load_policy(model_dir)
    model = get_peft_model(model, LoraConfig(r=cfg.model.lora_r, lora_alpha=cfg.model.lora_alpha, task_type="CAUSAL_LM",
                                             target_modules=list(cfg.model.lora_target_modules))).eval()
    sampling = SamplingParams(temperature=v.temperature, top_p=v.top_p, max_new_tokens=v.max_new_tokens, seed=eval_seed)
    server = VLLMPolicyServer(model_dir, workdir=out / "evaluator", lora_rank=cfg.model.lora_r, merge_lora=True,
                              python=require_vllm_python(), kv_cache_gib=2, max_model_len=2048, seed=eval_seed,
                              max_num_seqs=32)
    version = 0

    def measure(label: str):
        t = time.perf_counter()
        eps = pool.run(tasks, samples=v.k)
        apply_group_policy(eps, "keep", failed_reward=cfg.reward.failed_reward)
        rep = describe(eps, label)
        print(f"  {label}: pass@1 {rep.success_rate:.3f} +- {rep.success_ci95:.3f} "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
        return rep

    with server:
        server.start()
        spec = SamplerSpec(tokenizer=model_dir, sampling=sampling, url=server.url, policy_file=str(server.policy_file))
        with StrandsProcessPool(agent_spec(cfg), spec, environment(cfg), workers=1, slots=32) as pool:
            base = measure("base model")
            results = {"base": {"pass1": base.success_rate, "ci95": base.success_ci95}, "runs": []}
            for rec in records:
                print(f"{rec['engine']} seed {rec['seed']}", flush=True)
                points, target = [], None
                for k in rec["kept"]:
                    if target is not None and k is not rec["kept"][-1]:
                        continue  # past the target: only the run's last step is still evaluated
                    path = Path(rec["run_dir"]) / "kept" / f"step_{k['step']:04d}" / "adapter_model.safetensors"
                    set_peft_model_state_dict(model, load_file(str(path)))
                    version += 1
                    server.publish(model, version)
                    rep = measure(f"step {k['step']} ({k['wall_s']:.0f} s)")
                    d = paired_comparison(rep.per_task, base.per_task, seed=eval_seed)
                    points.append({**k, "pass1": rep.success_rate, "ci95": rep.success_ci95,
                                   "difference": d.mean_difference, "difference_ci95": list(d.ci95),
                                   "p_value": d.p_value})
                    # the points so far are consecutive kept steps: the target is the first of two in a row
                    if target is None and len(points) >= 2 and min(p["difference"] for p in points[-2:]) >= TARGET:
                        target = points[-2]
                results["runs"].append({key: rec[key] for key in ("engine", "seed", "setup_s", "wall_s", "steps")}
                                       | {"points": points, "target": target})
    return results


def report(results: dict) -> None:
    base = results["base"]
    print(f"\nbase model: pass@1 {base['pass1']:.3f} +- {base['ci95']:.3f}; target: +{TARGET:.2f} over it, held at the "
          "next kept step")
    print(f"{'engine':>6} {'seed':>4} {'setup s':>8} {'s/step':>7} {'target at step':>15} {'s to target':>12} "
          f"{'difference there (95% CI, p)':>34} {'final pass@1 (95% CI)':>22}")
    by = {}
    for r in results["runs"]:
        t, last = r["target"], r["points"][-1]
        per_step = (r["wall_s"] - r["setup_s"]) / r["steps"]
        there = (f"{t['difference']:+.3f} ({t['difference_ci95'][0]:+.3f} .. {t['difference_ci95'][1]:+.3f}, "
                 f"p {t['p_value']:.4f})" if t else "not reached")
        print(f"{r['engine']:>6} {r['seed']:>4} {r['setup_s']:>8.0f} {per_step:>7.1f} "
              f"{t['step'] if t else '-':>15} {t['wall_s'] if t else float('nan'):>12.0f} {there:>34} "
              f"{last['pass1']:.3f} +- {last['ci95']:.3f} (step {last['step']})")
        by[(r["engine"], r["seed"])] = t["wall_s"] if t else None
    for seed in sorted({s for _, s in by}):
        hf, vl = by.get(("hf", seed)), by.get(("vllm", seed))
        if hf and vl:
            print(f"seed {seed}: time to target hf / vllm = {hf:.0f} / {vl:.0f} s = {hf / vl:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--engines", default="hf,vllm")
    ap.add_argument("--steps", type=int, default=18)
    ap.add_argument("--eval-every", type=int, default=3)
    ap.add_argument("--eval-seed", type=int, default=0)
    ap.add_argument("--eval-tasks", type=int, default=0, help="held-out tasks (default: the config's 100)")
    ap.add_argument("--out", default="runs/quickstart_engines")
    ap.add_argument("--eval-only", action="store_true", help="evaluate the kept adapters of an earlier run")
    ap.add_argument("--reuse", action="store_true",
                    help="train only the (engine, seed) runs that an earlier, interrupted run did not finish")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        for engine in a.engines.split(","):
            timeline = out / f"{engine}_seed{seed}" / "kept" / "timeline.json"
            if a.eval_only or (a.reuse and timeline.is_file()):  # a finished run writes it last
                records.append(json.loads(timeline.read_text()))
            else:
                records.append(train(engine, seed, a.steps, a.eval_every, out))
    results = evaluate(records, out, a.eval_seed, a.eval_tasks or None)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    report(results)


if __name__ == "__main__":
    main()

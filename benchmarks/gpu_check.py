"""Every figure that only a GPU shows, in one block: what `benchmarks/gpu_check.sh` runs.

Sections, each in a process of its own (a clean CUDA context, its own peak memory), each with a
time limit out of one overall budget so that the whole check ends within it:

- ``env``: the device, torch and CUDA versions, and the embedded model prepared (dequantised once).
- ``quickstart``: the README's first run (``examples/quickstart/first_run.yaml``, the HF engine, the
  config's dtype) on the device: seconds per step, peak memory, held-out pass@1 and tool-call rate
  before and after.
- ``parity``: the sampler's log-probs (the HF engine, batched ``generate``) against the trainer's
  (``token_logprobs``, the update's own function) on the same sampled tokens, in bfloat16 and in
  float32: mean and max |delta| over the sampled tokens.
- ``rollout``: the worker pool and the HF engine with 128 and 512 episodes in flight (the quickstart's
  agent and tasks): episodes/min and sampled tokens/s (``rollout_engines.run_level``).
- ``update``: the trainer's update (``Trainer.update``, the same code a step runs) on a full batch of
  quickstart-shaped rows, LoRA, float32 and bfloat16: tokens/s, and the model FLOPs that makes
  against the device's measured dense GEMM rate (bf16 on a GPU, float32 on CPU) and its datasheet peak.

    .venv/bin/python benchmarks/gpu_check.py [--dry-run] [--out DIR] [--sections a,b] [--budget-s S]

``--dry-run`` runs every section at its smallest on whatever device there is (CI runs it on CPU),
so the script is known to work before a GPU is lent; every figure is labelled with its device.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "examples" / "quickstart"
SECTIONS = ("env", "quickstart", "parity", "rollout", "update")
# seconds each section may take on a GPU (the dry run's sizes take about a fifth on 2 CPU cores);
# with the shell script's unpacking they keep the whole check under 9 minutes on an H100
LIMITS = {"env": 90, "quickstart": 200, "parity": 60, "rollout": 200, "update": 60}
# dense bf16 peak from the datasheets (SXM parts, no sparsity), TFLOP/s: the nominal ceiling
DATASHEET_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0}


# -- helpers -------------------------------------------------------------------------------
def _device(dry_run: bool) -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def device_label(device: str) -> str:
    import torch

    if device == "cuda":
        return f"cuda: {torch.cuda.get_device_name(0)}"
    return f"cpu: {os.cpu_count()} cores"


def _peak_memory(device: str) -> dict:
    """Peak memory of this process (CUDA: what torch allocated and reserved; CPU: the resident set
    of this process and of its largest finished child, e.g. a worker process)."""
    if device == "cuda":
        import torch

        return {"peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
                "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30}
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    return {"peak_rss_gib": own, "peak_child_rss_gib": child}


def matmul_rate(device: str, dtype_name: str, n: int, repeats: int) -> float:
    """Measured dense GEMM rate, FLOP/s: n x n x n products after warm-ups (random data)."""
    import torch

    dtype = getattr(torch, dtype_name)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    if device == "cuda":
        torch.cuda.synchronize()
    return 2 * n**3 * repeats / (time.perf_counter() - t0)


# -- sections ------------------------------------------------------------------------------
def section_env(device: str, dry_run: bool) -> dict:
    import torch
    import transformers

    from agentboost.models.loading import resolve_model_path

    t0 = time.perf_counter()
    path = resolve_model_path("smollm2-135m-instruct")  # dequantised once into the cache
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
           "python": sys.version.split()[0], "model_ready_s": time.perf_counter() - t0, "model_path": str(path)}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        out.update(gpu=p.name, gpu_memory_gib=p.total_memory / 2**30, multiprocessors=p.multi_processor_count,
                   bf16=torch.cuda.is_bf16_supported())
    return out


def section_quickstart(device: str, dry_run: bool) -> dict:
    from agentboost.cli import main as cli

    overrides = [f"model.device={device}"]
    if dry_run:  # the same pipeline at its smallest: every stage runs once
        overrides += ["run.steps=1", "warm_start.demonstrations=4", "warm_start.epochs=1", "validation.max_tasks=2",
                      "validation.k=1"]
    with tempfile.TemporaryDirectory() as d:
        run_dir = Path(d) / "run"
        t0 = time.perf_counter()
        rc = cli(["train", str(QUICKSTART / "first_run.yaml"), *overrides, "--run-dir", str(run_dir)])
        wall = time.perf_counter() - t0
        if rc != 0:
            raise RuntimeError(f"agentboost train exited {rc}")
        steps = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
        steps = [s for s in steps if "time_step_s" in s]
        result = json.loads((run_dir / "result.json").read_text())
    first, last = result["validation"]["first"], result["validation"]["last"]
    return {"wall_s": wall, "steps": len(steps), "s_per_step": sum(s["time_step_s"] for s in steps) / len(steps),
            "rollout_s_per_step": sum(s["time_rollout_s"] for s in steps) / len(steps),
            "update_s_per_step": sum(s["time_update_s"] for s in steps) / len(steps),
            "pass1_before": first["pass@1"], "pass1_after": last["pass@1"],
            "tools_before": first["tool_call_rate"], "tools_after": last["tool_call_rate"],
            "val_episodes": last["episodes"], **_peak_memory(device)}


def _prompts(tokenizer, n: int) -> list[list[int]]:
    from agentboost.tasks import load_tasks

    tasks = load_tasks(str(QUICKSTART / "data" / "test.jsonl"))
    system = "You are a helpful assistant. Think step by step, then give the final answer as a number."
    return [list(tokenizer.apply_chat_template([{"role": "system", "content": system},
                                                {"role": "user", "content": t["question"]}],
                                               add_generation_prompt=True, return_dict=True)["input_ids"])
            for t in (tasks * (n // len(tasks) + 1))[:n]]


def section_parity(device: str, dry_run: bool) -> dict:
    """The sampler's log-probs against the trainer's on the same tokens, per dtype."""
    import torch

    from agentboost.models.loading import load_policy
    from agentboost.sampling.hf_engine import HFEngine
    from agentboost.sampling.protocol import SamplingParams
    from agentboost.trainer.batch import TrainRow, pad_batch
    from agentboost.trainer.loss import token_logprobs

    n, new = (4, 16) if dry_run else (64, 96)
    temperature = 1.0
    out = {}
    for dtype in ("bfloat16", "float32"):
        model, tok = load_policy("smollm2-135m-instruct", dtype=dtype, device=device)
        engine = HFEngine(model, tok, max_batch_size=n)
        try:
            prompts = _prompts(tok, n)
            futures = [engine.submit(p, SamplingParams(temperature=temperature, max_new_tokens=new, seed=i))
                       for i, p in enumerate(prompts)]
            samples = [f.result() for f in futures]
        finally:
            engine.close()
        rows = []
        for p, s in zip(prompts, samples):
            rows.append(TrainRow(str(len(rows)), "g", p + list(s.response_ids),
                                 [0] * len(p) + [1] * len(s.response_ids), [0.0] * len(p) + list(s.logprobs)))
        deltas = []
        with torch.no_grad():
            for i in range(0, len(rows), 16):
                batch = pad_batch(rows[i:i + 16], tok.pad_token_id, device=device)
                logp = token_logprobs(model, batch, temperature, checkpoint_layers=False).float()
                mask = batch["response_mask"].bool()
                deltas.append((logp - batch["old_log_prob"])[mask].abs().cpu())
        d = torch.cat(deltas)
        out[dtype] = {"tokens": int(d.numel()), "mean_abs_delta": float(d.mean()), "max_abs_delta": float(d.max()),
                      "p99_abs_delta": float(d.quantile(0.99)) if d.numel() > 1 else float(d.max())}
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
    return out


def section_rollout(device: str, dry_run: bool, levels: list[int]) -> dict:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from rollout_engines import run_level

    from agentboost.models.loading import resolve_model_path
    from agentboost.sampling.policy_server import HFPolicyServer
    from agentboost.tasks import load_tasks

    model_dir = str(resolve_model_path("smollm2-135m-instruct"))
    tasks = load_tasks(str(QUICKSTART / "data" / "train.jsonl"))
    out = {}
    for n in levels:
        # every episode in flight decodes in one batch: on a GPU the engine is not the queue
        with HFPolicyServer.from_pretrained(model_dir, max_batch_size=n, batch_wait_s=0.05) as server:
            r = run_level(server.url, None, model_dir, tasks, n, timeout_s=120.0)
        out[str(n)] = {"episodes": r["episodes"], "wall_s": r["wall_s"], "episodes_per_min": r["episodes_s"] * 60,
                       "tokens_per_s": r["tok_s"], "p50_s": r["p50_s"], "p90_s": r["p90_s"],
                       "not_ok": r["not_ok"], "timeouts": r["timeouts"]}
    return out


def _matmul_flops_per_token(model) -> float:
    """Forward FLOPs per token of the dense layers: 2 x the weights every token multiplies (the
    decoder's linear layers and the output head; the embedding lookup is no product)."""
    import torch

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    n = sum(m.weight.numel() for m in base.modules() if isinstance(m, torch.nn.Linear))
    head = base.get_output_embeddings()
    if head is not None and not any(head is m for m in base.modules() if isinstance(m, torch.nn.Linear)):
        n += head.weight.numel()
    return 2.0 * n


def section_update(device: str, dry_run: bool) -> dict:
    """The trainer's update (``policy_update``, what ``Trainer.update`` runs) on a full batch of random
    quickstart-shaped rows, LoRA as the quickstart trains it: processed tokens/s and the FLOPs that
    makes against the measured GEMM rate."""
    import torch

    from agentboost.models.loading import load_policy
    from agentboost.trainer.batch import TrainRow
    from agentboost.run.config import load_config
    from agentboost.trainer.loop import policy_update

    rows_n, prompt_len, resp_len = (4, 48, 16) if dry_run else (64, 384, 128)
    gemm_n = 8192 if device == "cuda" else (512 if dry_run else 2048)
    # each update is set against the GEMM rate of its own dtype (float32 on a GPU: no TF32, torch's default)
    out = {"gemm_tflops": {dt: matmul_rate(device, dt, gemm_n, 20 if device == "cuda" else 3) / 1e12
                           for dt in ("float32", "bfloat16")}}
    if device == "cuda":
        name = torch.cuda.get_device_name(0)
        peak = next((v for k, v in DATASHEET_BF16_TFLOPS.items() if k in name), None)
        if peak:
            out["datasheet_bf16_tflops"] = peak
    for dtype in ("float32", "bfloat16"):
        cfg = load_config(str(QUICKSTART / "first_run.yaml"),
                          [f"model.device={device}", f"model.dtype={dtype}", "optim.micro_batch_tokens=16384"])
        model, tok = load_policy(cfg.model.path, dtype=dtype, device=device)
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=cfg.model.lora_r, lora_alpha=cfg.model.lora_alpha,
                                                 lora_dropout=cfg.model.lora_dropout, task_type="CAUSAL_LM",
                                                 target_modules=list(cfg.model.lora_target_modules)))
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=cfg.optim.lr)
        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)

        def update():  # the trainer's own update, as a synchronous step calls it (no KL term: kl_coef 0)
            return policy_update(model, opt, scheduler, rows, cfg, tok.pad_token_id,
                                 temperature=cfg.sampling.temperature, step=1)

        g = torch.Generator().manual_seed(0)
        vocab = model.config.vocab_size
        rows = []
        for i in range(rows_n):
            ids = torch.randint(0, vocab, (prompt_len + resp_len,), generator=g).tolist()
            rows.append(TrainRow(str(i), str(i // 4), ids, [0] * prompt_len + [1] * resp_len,
                                 [0.0] * prompt_len + [-2.0] * resp_len, advantage=1.0 if i % 2 else -1.0))
        update()  # warm-up (allocator, kernels)
        if device == "cuda":
            torch.cuda.synchronize()
        reps = 1 if dry_run else 3
        t0 = time.perf_counter()
        for _ in range(reps):
            m = update()
        if device == "cuda":
            torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / reps
        tokens = rows_n * (prompt_len + resp_len)
        fwd = _matmul_flops_per_token(model)
        # forward + the backward's activation gradients (LoRA: frozen weights get no gradient)
        # + the recomputed forward of gradient checkpointing: 3 forwards' worth per token
        passes = 3.0 if cfg.optim.gradient_checkpointing else 2.0
        flops = tokens * fwd * passes
        out[dtype] = {"rows": rows_n, "tokens_per_update": tokens, "trained_tokens": m["trained_tokens"],
                      "update_s": dt, "tokens_per_s": tokens / dt, "trained_tokens_per_s": m["trained_tokens"] / dt,
                      "model_tflops": flops / dt / 1e12,
                      "fraction_of_measured_gemm": flops / dt / 1e12 / out["gemm_tflops"][dtype],
                      "flops_counted": f"{passes:g} x 2 x dense weights per token ({fwd / 2e6:.0f} M)"}
        if "datasheet_bf16_tflops" in out:
            out[dtype]["fraction_of_datasheet_bf16"] = flops / dt / 1e12 / out["datasheet_bf16_tflops"]
        del model, opt, scheduler
        if device == "cuda":
            torch.cuda.empty_cache()
    out.update(_peak_memory(device))
    return out


# -- the block -----------------------------------------------------------------------------
def _fmt(results: dict, dry_run: bool) -> str:
    lines = [f"== agentboost gpu_check{' (dry run: smallest sizes)' if dry_run else ''} =="]

    def where(sec: str) -> str:
        return f"[{results[sec].get('device', '?')}]"

    for sec in SECTIONS:
        r = results.get(sec)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"{sec}: FAILED after {r.get('seconds', 0):.0f} s: {r['error']} {where(sec)}")
            continue
        if sec == "env":
            gpu = (f"{r['gpu']}, {r['gpu_memory_gib']:.0f} GiB, {r['multiprocessors']} SMs, bf16 {r['bf16']}"
                   if "gpu" in r else "no GPU")
            lines.append(f"env: {gpu}; torch {r['torch']} (CUDA {r['cuda']}), transformers {r['transformers']}, "
                         f"Python {r['python']}; model ready in {r['model_ready_s']:.0f} s {where(sec)}")
        elif sec == "quickstart":
            mem = (f"peak memory {r['peak_allocated_gib']:.2f} GiB allocated / {r['peak_reserved_gib']:.2f} GiB reserved"
                   if "peak_allocated_gib" in r else
                   f"peak RSS {r['peak_rss_gib']:.2f} GiB (trainer), {r['peak_child_rss_gib']:.2f} GiB (largest worker)")
            lines.append(f"quickstart (hf engine): {r['steps']} steps, {r['s_per_step']:.2f} s/step "
                         f"(rollout {r['rollout_s_per_step']:.2f}, update {r['update_s_per_step']:.2f}), wall "
                         f"{r['wall_s']:.0f} s; {mem}; held-out pass@1 {r['pass1_before']:.3f} -> {r['pass1_after']:.3f} "
                         f"({r['pass1_after'] - r['pass1_before']:+.3f}), tool-call rate {r['tools_before']:.2f} -> "
                         f"{r['tools_after']:.2f} ({r['val_episodes']} episodes) {where(sec)}")
        elif sec == "parity":
            for dtype in ("bfloat16", "float32"):
                p = r[dtype]
                lines.append(f"log-prob parity {dtype} (hf sampler vs trainer, same tokens): mean |d| "
                             f"{p['mean_abs_delta']:.2g}, p99 {p['p99_abs_delta']:.2g}, max {p['max_abs_delta']:.2g} "
                             f"over {p['tokens']} tokens {where(sec)}")
        elif sec == "rollout":
            for n, v in r.items():
                if not n.isdigit():
                    continue
                if "error" in v:
                    lines.append(f"rollout, {n} episodes in flight: FAILED after {v['seconds']:.0f} s: {v['error']}")
                    continue
                lines.append(f"rollout, {n} episodes in flight (pool + hf engine): {v['episodes_per_min']:.0f} episodes/min, "
                             f"{v['tokens_per_s']:.0f} sampled tokens/s, p50 {v['p50_s']:.1f} s, p90 {v['p90_s']:.1f} s, "
                             f"not ok {v['not_ok']}/{v['episodes']} {where(sec)}")
        elif sec == "update":
            sheet = f" (datasheet bf16 {r['datasheet_bf16_tflops']:.0f})" if "datasheet_bf16_tflops" in r else ""
            lines.append(f"measured dense GEMM: float32 {r['gemm_tflops']['float32']:.3g} TFLOP/s, bfloat16 "
                         f"{r['gemm_tflops']['bfloat16']:.3g} TFLOP/s{sheet} {where(sec)}")
            for dtype in ("float32", "bfloat16"):
                u = r[dtype]
                extra = (f", {u['fraction_of_datasheet_bf16']:.1%} of the datasheet bf16 peak"
                         if "fraction_of_datasheet_bf16" in u else "")
                lines.append(f"update {dtype} (LoRA, {u['rows']} rows x {u['tokens_per_update'] // u['rows']} tokens): "
                             f"{u['tokens_per_s']:.0f} tokens/s ({u['trained_tokens_per_s']:.0f} trained/s), "
                             f"{u['model_tflops']:.3g} TFLOP/s = {u['fraction_of_measured_gemm']:.1%} of the measured "
                             f"{dtype} GEMM{extra} [{u['flops_counted']}] {where(sec)}")
    return "\n".join(lines)


def run_section(name: str, dry_run: bool, levels: list[int]) -> dict:
    device = _device(dry_run)
    fn = {"env": section_env, "quickstart": section_quickstart, "parity": section_parity,
          "update": section_update}.get(name)
    res = section_rollout(device, dry_run, levels) if name == "rollout" else fn(device, dry_run)
    return {**res, "device": device_label(device)}


def _run_job(sec: str, levels: list[int], dry_run: bool, limit: float) -> dict:
    """One section in a process of its own, in a session of its own: a section over its limit is
    ended with everything it started (worker processes, the policy server)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [sys.executable, __file__, "--section", sec, "--json", f.name, "--levels", ",".join(map(str, levels))]
        proc = subprocess.Popen(cmd + (["--dry-run"] if dry_run else []), start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
            body = Path(f.name).read_text()
            return json.loads(body) if rc == 0 and body else {"error": f"exit status {rc}"}
        except subprocess.TimeoutExpired:
            return {"error": f"over its limit of {limit:.0f} s"}
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="every section at its smallest, on whatever device there is")
    ap.add_argument("--out", default=None, help="write gpu_check.json and gpu_check.txt here")
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--levels", default=None, help="episodes in flight for the rollout section (default 128,512; dry run 8)")
    ap.add_argument("--budget-s", type=float, default=450.0, help="the whole check's time budget (default 450)")
    ap.add_argument("--section", help=argparse.SUPPRESS)  # internal: run one section, write its JSON
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    levels = [int(x) for x in (args.levels or ("8" if args.dry_run else "128,512")).split(",")]
    if args.section:
        res = run_section(args.section, args.dry_run, levels)
        Path(args.json).write_text(json.dumps(res))
        return 0
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        print(f"gpu_check: unknown section(s) {', '.join(unknown)}; expected some of {', '.join(SECTIONS)}",
              file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.budget_s
    results: dict[str, dict] = {}
    out_dir = Path(args.out) if args.out else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    # the rollout levels run one process each: a level over its limit leaves the others' figures
    jobs = [(sec, [n] if sec == "rollout" else levels) for sec in wanted for n in (levels if sec == "rollout" else [0])]
    for sec, job_levels in jobs:
        left = deadline - time.monotonic()
        share = LIMITS[sec] / (len(levels) if sec == "rollout" else 1)
        limit = min(share * (3 if args.dry_run else 1), left)
        t0 = time.perf_counter()
        name = f"{sec} {job_levels[0]}" if sec == "rollout" else sec
        if limit < 10:
            res = {"error": "no time left in the budget"}
        else:
            print(f"-- {name} (limit {limit:.0f} s)", flush=True)
            res = _run_job(sec, job_levels, args.dry_run, limit)
        res["seconds"] = time.perf_counter() - t0
        if sec == "rollout":
            merged = results.setdefault("rollout", {})
            if "error" in res:
                merged[str(job_levels[0])] = {"error": res["error"], "seconds": res["seconds"]}
            else:
                merged.update(res)
        else:
            results[sec] = res
        if out_dir:  # after every section: a check cut short still leaves what it measured
            (out_dir / "gpu_check.json").write_text(json.dumps(results, indent=2))
    block = _fmt(results, args.dry_run)
    print("\n" + block)
    if out_dir:
        (out_dir / "gpu_check.txt").write_text(block + "\n")
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

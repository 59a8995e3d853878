"""Training the prompt when the weights stay as they are (``algorithm.policy: prompt``).

The policy is the agent's prompt (``run/prompt_policy.py``). Each step samples GRPO groups with
the current prompt, exactly as a weights run does (the same pool, rewards, group policy and
advantages), and turns them into candidate prompts, each tier switchable:

(a) demonstrations: the step's highest-advantage successful episodes, or the step's tasks answered
    from the ``solution`` their rows carry through the real agent (``agents/demonstrations.py``, as
    the warm start does), put in the agent's history as prior turns;
(b) an instruction from the user's pool (``prompt.instruction_pool``), one per step, in turn;
(c) a reflective edit: an optimizer (``prompt.optimizer``, ``module:function``) reads contrasting
    high- and low-advantage episodes and proposes an instruction.

The gate: every candidate runs on held-out tasks with the same seeds as the current prompt, and the
two are compared with ``eval``'s paired test (``evaluation/statistics.py``, the one
implementation of those statistics). Only a significant improvement (p below
``prompt.gate_alpha`` and a mean difference of at least ``prompt.gate_min_effect``) is accepted;
every candidate, accepted or not, is kept in the policy's history with its figures and logged in
``events.jsonl``. No weight changes: the policy model is served as given.

The gate's held-out tasks are kept apart from ``data.val_file`` (by default the last
``prompt.gate_tasks`` rows of the training file, which then never serve as training tasks), so the
final validation, which compares the trained prompt with the base prompt on ``data.val_file`` with
the same paired test, is not the set the selection was made on.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from ...episodes.record import STATUSES, Episode, EpisodeWriter
from ...episodes.summary import tool_use_metrics
from ...errors import InputError
from ...evaluation.evaluate import describe
from ...evaluation.statistics import paired_comparison
from ...files import atomic_directory, atomic_write_text
from ...imports import ImportPathError, import_object
from ...models.chat import chat_model_spec
from ...rewards.groups import apply_group_policy
from ...rollout.pool import StrandsProcessPool
from ...run import assembly, health
from ...run.checkpoint import newest_intact, write_manifest
from ...run.config import ConfigError, TrainConfig
from ...run.lifecycle import RunLifecycle
from ...run.metrics import validation_metrics, validation_summary
from ...run.prompt_policy import FILE_NAME, Demonstration, PromptPolicy
from ...sampling.protocol import SamplingParams, derive_seed
from ...sampling.spec import SamplerSpec
from ...tasks import load_tasks
from .. import loss as losses
from .candidates import (  # noqa: F401 (a config's prompt.optimizer may name it by its 0.2 path, this module)
    PromptTrainingError,
    contrast,
    demonstration_from_episode,
    policy_demonstrations,
    strands_optimizer,
)


class PromptTrainer(RunLifecycle):
    """``agentboost train`` with ``algorithm.policy: prompt``: the prompt changes, never the weights.
    Its step (candidates from the groups, each through the held-out gate), checkpoint (the prompt
    policy) and validation are its own; start, budget, SIGTERM, failure and summary are the run's
    (``run/lifecycle.py``), as for the weights trainer."""

    def __init__(self, cfg: TrainConfig | None, run_dir: str | Path, resume: bool = False, log=print,
                 sampler: SamplerSpec | None = None):
        """``sampler``: the policy as a ready sampler (a server already running, or a scripted
        policy in tests) instead of ``model.path`` served from here; each pool gets its sampling."""
        self._sampler = sampler
        self.server = None
        self._pools: dict[str, tuple[PromptPolicy, StrandsProcessPool]] = {}  # by kind: train, gate, validation
        self.cost_usd = 0.0
        self.next_instruction = 0
        self._gate_cache: tuple[PromptPolicy, list[Episode]] | None = None
        self._first_val: list[Episode] | None = None
        super().__init__(cfg, run_dir, resume, log)

    def prepare(self) -> tuple[list[dict], list[dict]]:
        cfg, log = self.cfg, self.log
        p = cfg.prompt
        train = load_tasks(cfg.data.train_file, question_field=cfg.data.question_field)
        if p.gate_file:
            self.gate_tasks = load_tasks(p.gate_file, question_field=cfg.data.question_field)[: p.gate_tasks]
        else:  # the gate holds out the training file's last rows, which then never train
            if len(train) < p.gate_tasks + cfg.data.tasks_per_step:
                raise ConfigError(f"config: data.train_file holds {len(train)} tasks: too few to hold out "
                                  f"prompt.gate_tasks={p.gate_tasks} and still draw data.tasks_per_step="
                                  f"{cfg.data.tasks_per_step} (or give prompt.gate_file)")
            self.gate_tasks, train = train[-p.gate_tasks:], train[: -p.gate_tasks]
        if len(self.gate_tasks) < 2:
            raise ConfigError(f"config: prompt.gate_file {p.gate_file} holds {len(self.gate_tasks)} task(s); the gate "
                              "needs at least 2")
        val = (load_tasks(cfg.data.val_file, question_field=cfg.data.question_field)[: cfg.validation.max_tasks]
               if cfg.data.val_file else [])
        if p.demonstrations and p.demonstration_source == "solutions":
            from ...agents.demonstrations import check_solution

            for t in train:  # before anything runs: a row without one is named
                try:
                    check_solution(t)
                except InputError as e:
                    raise ConfigError(f"config: prompt.demonstration_source is solutions but data.train_file's {e}") from None
        # the policy as a chat model we do not train (a hosted model): text-level episodes, their
        # token usage priced and counted against run.max_cost
        self.chat = chat_model_spec(p.policy_model, "prompt.policy_model") if p.policy_model else None
        if self.chat is not None:
            self.chat.api_key()  # a key that is not there: one line now, not an error in every episode
            priced = self.chat.cost_usd(1_000_000, 0) or self.chat.cost_usd(0, 1_000_000)
            log(f"policy: {self.chat.describe()} through Strands' {self.chat.provider} provider (text-level episodes; "
                + (f"token costs count against run.max_cost {cfg.run.max_cost:g})" if priced and cfg.run.max_cost
                   else "no token prices or no run.max_cost: costs not budgeted)"))
        self.optimizer = None
        if p.optimizer:
            try:
                self.optimizer = import_object(p.optimizer, "prompt optimizer")
            except ImportPathError as e:
                raise ConfigError(f"config: prompt.optimizer: {e}") from None
        return train, val

    def build(self) -> None:
        self.base_spec, self.env = assembly.agent_spec(self.cfg), assembly.environment(self.cfg)
        self.policy = PromptPolicy(system_prompt=self.base_spec.system_prompt or "")
        self._start_server()

    def _start_server(self) -> None:
        from ...models.loading import load_policy, resolve_model_path

        cfg = self.cfg
        self.model_path = str(resolve_model_path(cfg.model.path))
        if self._sampler is not None or self.chat is not None:  # model.path: the tokenizer of solutions only
            return
        model, tok = load_policy(self.model_path, dtype=cfg.model.dtype, device=cfg.model.device)
        model.eval().requires_grad_(False)  # served as given: the prompt trains, the weights do not
        self.engine_name, self.server = assembly.start_policy(cfg, self.model_path, model=model, tokenizer=tok,
                                                     workdir=self.run_dir / "vllm")

    def restore(self) -> tuple[str, list[str]]:
        from ...run.prompt_policy import load_prompt_policy

        ckpt = newest_intact(self.run_dir)
        state = json.loads((ckpt / "trainer_state.json").read_text())
        self.policy = load_prompt_policy(ckpt / FILE_NAME)
        self.step, self.elapsed_before = state["step"], state.get("elapsed_s", 0.0)
        self.next_instruction = state.get("next_instruction", 0)
        self.cost_usd = state.get("cost_usd", 0.0)
        self.validations = state.get("validations", [])
        self.stream.load(state["data"])
        self.log(f"resumed {self.run_dir} at step {self.step} from {ckpt.name}: {self.policy.summary()}")
        return ckpt.name, []

    # -- pools: one set per prompt version (a worker's agent is fixed when it starts) ------------
    def _sampling(self, kind: str) -> SamplingParams:
        cfg = self.cfg
        if kind == "train":
            return assembly.sampling(cfg, "train")
        # seeded: the candidate and the current prompt meet the same random numbers per (task, sample)
        return assembly.sampling(cfg, "validation", seed=cfg.run.seed,
                        temperature=cfg.prompt.gate_temperature if kind == "gate" else None)

    def _run(self, policy: PromptPolicy, kind: str, tasks: list[dict], samples: int,
             seed: int | None = None) -> list[Episode]:
        held = self._pools.get(kind)
        if held is None or held[0] is not policy:
            if held is not None:  # the older prompt's workers go
                self._pools.pop(kind)[1].close()
            if self._sampler is not None:
                sampler = dataclasses.replace(self._sampler, sampling=self._sampling(kind))
            elif self.chat is not None:
                sampler = assembly.chat_sampler_spec(self.chat, self._sampling(kind))
            else:
                sampler = assembly.sampler_spec(self.server, self.engine_name, self.model_path,
                                                self._sampling(kind))
            pool = assembly.policy_pool(self.cfg, policy.apply(self.base_spec), sampler, self.env)
            held = self._pools[kind] = (policy, pool)
        episodes = assembly.run_episodes(held[1], tasks, samples, kind, seed=seed)
        apply_group_policy(episodes, "keep", failed_reward=self.cfg.reward.failed_reward)
        if self.chat is not None:  # what the provider reported, at the configured prices
            for ep in episodes:
                usage = (ep.metadata.get("text_level") or {}).get("usage") or {}
                self.cost_usd += self.chat.cost_usd(usage.get("input_tokens", 0), usage.get("output_tokens", 0))
        return episodes

    def release(self) -> None:
        for _, pool in self._pools.values():
            pool.close()
        self._pools.clear()
        if self.server is not None:
            self.server.close()

    def tokens_usd(self) -> tuple[float, str]:
        return self.cost_usd, self.chat.describe() if self.chat is not None else ""

    def before_steps(self) -> None:
        super().before_steps()  # the base prompt
        self.log(f"gate: {len(self.gate_tasks)} held-out tasks x {self.cfg.prompt.gate_samples}, "
                 f"alpha {self.cfg.prompt.gate_alpha:g}, minimum effect {self.cfg.prompt.gate_min_effect:g}")

    def summary(self) -> dict[str, Any]:
        self.log(self.history_table())
        accepted = [h for h in self.policy.history if h["accepted"]]
        return {"policy": "prompt", "prompt_policy": self.policy.summary(), "candidates": len(self.policy.history),
                "accepted": accepted, "cost_usd": self.cost_usd}

    def train_step(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        step = self.step + 1
        tasks = self.stream.next_batch()
        # seeded per step on every engine: a prompt checkpoint holds no sampler RNG (and vLLM's is in its
        # server), so without a seed a resumed step sampled otherwise than the untouched run's
        episodes = self._run(self.policy, "train", tasks, cfg.data.group_size,
                             seed=derive_seed(cfg.run.seed, "train", step))
        kept, _ = apply_group_policy(episodes, cfg.reward.group_policy, group_size=cfg.data.group_size,
                                     failed_reward=cfg.reward.failed_reward)
        adv = losses.compute_advantages(kept, cfg.algorithm.adv_estimator, cfg.algorithm.norm_adv_by_std,
                                        cfg.algorithm.gamma)
        with EpisodeWriter(self.run_dir / "episodes" / f"step_{step:06d}.jsonl") as w:
            for ep in episodes:
                w.write(ep)
        self.check_health(episodes, step)  # written first: nothing lost
        for warning in health.step_warnings(episodes, adv.all_equal_groups, adv.groups):
            self.log(f"warning: step {step}: {warning}")
            self.metrics.log_event({"event": "warning", "step": step, "warning": warning})
        t_roll = time.perf_counter() - t0
        tried = accepted = 0
        for tier, candidate, change, evidence in self.candidates(step, tasks, episodes, adv.by_episode):
            tried += 1
            accepted += self.gate(step, tier, candidate, change, evidence)
        if tried == 0:
            warning = "no candidate prompt could be built from this step (see the tiers in docs/prompt-policy.md)"
            self.log(f"warning: step {step}: {warning}")
            self.metrics.log_event({"event": "warning", "step": step, "warning": warning})
        self.step = step
        rewards = [ep.reward for ep in episodes if ep.reward is not None]
        statuses = {s: sum(ep.status == s for ep in episodes) for s in STATUSES}
        m = {"step": step, "reward_mean": float(np.mean(rewards)) if rewards else None,
             "success_rate": sum(ep.succeeded for ep in episodes) / len(episodes),
             "all_equal_group_rate": adv.all_equal_groups / max(1, adv.groups), "statuses": statuses,
             **tool_use_metrics(episodes), "candidates": tried, "accepted": accepted,
             "prompt_version": self.policy.version, "demonstrations": len(self.policy.demonstrations),
             "instructions": len(self.policy.instructions), "time_rollout_s": t_roll,
             "time_gate_s": time.perf_counter() - t0 - t_roll, "time_step_s": time.perf_counter() - t0,
             "elapsed_s": self.elapsed(), "cost_usd": self.cost_usd}
        self.metrics.log_step(m)
        self.metrics.log_event({"event": "progress", "step": step, "total_steps": cfg.run.steps,
                                **{k: m[k] for k in ("reward_mean", "success_rate", "statuses", "elapsed_s")}})
        self.log(f"step {step}/{cfg.run.steps}  reward {m['reward_mean']:.3f}  success {m['success_rate']:.2f}  "
                 f"tools {m['tool_call_rate']:.2f}  candidates {tried}, accepted {accepted}  "
                 f"{self.policy.summary()}  {m['time_step_s']:.1f}s")
        return m

    def candidates(self, step: int, tasks: list[dict], episodes: list[Episode], advantages: dict[str, float]):
        """(tier, candidate policy, change, evidence) of each switched-on tier, built lazily: a tier
        sees the policy that the gate left after the previous one."""
        p = self.cfg.prompt
        if p.demonstrations:
            demos = self._new_demonstrations(step, tasks, episodes, advantages)
            if demos:
                kept = [*self.policy.demonstrations, *demos][-p.max_demonstrations:]
                dropped = [d.task_id for d in self.policy.demonstrations if d not in kept]
                yield ("demonstrations", self.policy.with_change(demonstrations=kept),
                       {"added": [d.task_id for d in demos], "dropped": dropped},
                       {"sources": [d.source for d in demos], "episodes": [d.episode_id for d in demos],
                        "advantages": [d.advantage for d in demos], "rewards": [d.reward for d in demos]})
        if p.instruction_pool and self.next_instruction < len(p.instruction_pool):
            i = self.next_instruction
            self.next_instruction += 1
            text = p.instruction_pool[i]
            yield ("instructions", self.policy.with_change(instructions=[*self.policy.instructions, text]),
                   {"instruction": text}, {"pool_index": i})
        if self.optimizer is not None:
            view = contrast(self.policy, episodes, advantages, {str(t["task_id"]): t for t in tasks})
            if view is None:
                self.log(f"step {step}: no contrast for the optimizer (no group with a better and a worse episode)")
            else:
                text = self.optimizer(view, **self.cfg.prompt.optimizer_options)
                if text is not None and not isinstance(text, str):
                    raise PromptTrainingError(f"prompt.optimizer {p.optimizer} returned {type(text).__name__}; "
                                              "expected an instruction (text) or None")
                if text and text.strip():
                    yield ("reflection", self.policy.with_change(instructions=[*self.policy.instructions, text.strip()]),
                           {"instruction": text.strip()},
                           {"high": [h["task_id"] for h in view.high], "low": [x["task_id"] for x in view.low],
                            "high_advantages": [h["advantage"] for h in view.high],
                            "low_advantages": [x["advantage"] for x in view.low]})

    def _new_demonstrations(self, step, tasks, episodes, advantages) -> list[Demonstration]:
        p = self.cfg.prompt
        have = {d.task_id for d in self.policy.demonstrations}
        demos: list[Demonstration] = []
        if p.demonstration_source in ("policy", "auto"):
            demos = policy_demonstrations(episodes, advantages, p.demonstrations_per_candidate, step, have)
        if p.demonstration_source == "solutions" or (p.demonstration_source == "auto" and not demos):
            from ...agents.demonstrations import check_solution

            def solvable(t):
                try:
                    return bool(check_solution(t))
                except InputError:
                    return False

            todo = [t for t in tasks if str(t["task_id"]) not in have and solvable(t)][: p.demonstrations_per_candidate]
            if todo:
                from ..warm_start import demonstrate

                played = demonstrate(self.cfg, todo, self.base_spec, self.env, self.model_path,
                                     self.run_dir / "prompt_demonstrations")
                with EpisodeWriter(self.run_dir / "episodes" / f"demonstrations_step_{step:06d}.jsonl") as w:
                    for ep in played:
                        w.write(ep)
                for ep in played:
                    demo = demonstration_from_episode(ep, "solution", step) if ep.succeeded else None
                    if demo is None:
                        self.log(f"warning: step {step}: the solution of task {ep.task_id} did not succeed through "
                                 f"the agent ({ep.status}: {ep.error or 'reward ' + str(ep.reward)}); left out")
                    else:
                        demos.append(demo)
        return demos

    def _gate_episodes(self, policy: PromptPolicy, step: int) -> list[Episode]:
        if self._gate_cache is not None and self._gate_cache[0] is policy:
            return self._gate_cache[1]
        eps = self._run(policy, "gate", self.gate_tasks, self.cfg.prompt.gate_samples)
        with EpisodeWriter(self.run_dir / "episodes" / f"gate_step_{step:06d}_current.jsonl") as w:
            for ep in eps:  # kept as the candidates' are: the comparison, and what they cost, can be checked
                w.write(ep)
        self._gate_cache = (policy, eps)
        return eps

    def gate(self, step: int, tier: str, candidate: PromptPolicy, change: dict, evidence: dict) -> bool:
        """The candidate against the current prompt on the held-out gate tasks (same seeds), with
        ``eval``'s paired test; accepted only for a significant improvement."""
        p = self.cfg.prompt
        current = self._gate_episodes(self.policy, step)
        cand = self._run(candidate, "gate", self.gate_tasks, p.gate_samples)
        with EpisodeWriter(self.run_dir / "episodes" / f"gate_step_{step:06d}_{tier}.jsonl") as w:
            for ep in cand:
                w.write(ep)
        new, old = describe(cand, "candidate"), describe(current, "current")
        test = paired_comparison(new.per_task, old.per_task, alpha=p.gate_alpha, seed=self.cfg.run.seed)
        ok = test.significant and test.mean_difference > 0 and test.mean_difference >= p.gate_min_effect
        why = ("significant improvement" if ok else
               f"p = {test.p_value:.4f} >= alpha {p.gate_alpha:g}" if not test.significant else
               "significantly worse" if test.mean_difference < 0 else
               f"difference {test.mean_difference:+.3f} below the minimum effect {p.gate_min_effect:g}")
        entry = {"step": step, "tier": tier, "version": candidate.version if ok else None,
                 "from_version": self.policy.version, "change": change, "evidence": evidence,
                 "gate": {"candidate_success": new.success_rate, "current_success": old.success_rate,
                          "candidate_tool_call_rate": new.tool_call_rate, "current_tool_call_rate": old.tool_call_rate,
                          "mean_difference": test.mean_difference, "ci95": list(test.ci95) if test.ci95 else None, "p_value": test.p_value,
                          "differing_tasks": test.differing_tasks, "tasks": test.tasks, "samples": p.gate_samples,
                          "alpha": p.gate_alpha, "min_effect": p.gate_min_effect},
                 "accepted": ok, "reason": why}
        self.policy.history.append(entry)
        if ok:
            candidate.history = self.policy.history
            self.policy = candidate
            self._gate_cache = (candidate, cand)
        self.metrics.log_event({"event": "prompt_candidate", **entry})
        from ...evaluation.statistics import difference_text

        self.log(f"step {step} {tier} candidate: tools {new.tool_call_rate:.2f} vs {old.tool_call_rate:.2f}, "
                 + difference_text(new.success_rate, old.success_rate, test.mean_difference, test.ci95, test.p_value,
                                   test.tasks)
                 + f": {'ACCEPTED as v' + str(candidate.version) if ok else 'rejected (' + why + ')'}")
        return ok

    def validate(self) -> dict[str, Any]:
        """The current prompt on ``data.val_file`` (seeded); after the first, paired against the
        first validation (the base prompt), with the same test as the gate and ``eval``."""
        k = self.cfg.validation.k
        episodes = self._run(self.policy, "validation", self.val_tasks, k)
        with EpisodeWriter(self.run_dir / "episodes" / f"val_step_{self.step:06d}.jsonl") as w:
            for ep in episodes:
                w.write(ep)
        m = {**validation_metrics(self.cfg, self.step, episodes), "prompt_version": self.policy.version}
        summary = {**validation_summary(m), "prompt_version": self.policy.version}
        first = self._first_val_episodes()
        if first is None:
            self._first_val = episodes
        else:
            test = paired_comparison(describe(episodes, "now").per_task, describe(first, "first").per_task,
                                     alpha=self.cfg.prompt.gate_alpha, seed=self.cfg.run.seed)
            summary["against_first"] = m["val_against_first"] = {
                "mean_difference": test.mean_difference, "ci95": list(test.ci95) if test.ci95 else None, "p_value": test.p_value,
                "differing_tasks": test.differing_tasks, "significant": test.significant}
        self.metrics.log_validation(m)
        self.validations.append(summary)
        against = summary.get("against_first")
        self.log(f"validation at step {self.step} (prompt v{self.policy.version}): {summary['figure']}  "
                 f"tools {m['val_tool_call_rate']:.2f}"
                 + (f"  vs step {self.validations[0]['step']}: {against['mean_difference']:+.3f}, "
                    f"p = {against['p_value']:.4f}" if against else ""))
        return m

    def _first_val_episodes(self) -> list[Episode] | None:
        if self._first_val is None and self.validations:  # resumed: read the first validation back
            from ...episodes.record import read_episodes

            path = self.run_dir / "episodes" / f"val_step_{self.validations[0]['step']:06d}.jsonl"
            if path.is_file():
                self._first_val = list(read_episodes(path))
        return self._first_val

    def checkpoint(self) -> Path:
        root = self.run_dir / "checkpoints"
        final = root / f"step_{self.step:06d}"
        state = {"step": self.step, "data": self.stream.state(), "elapsed_s": self.elapsed(),
                 "next_instruction": self.next_instruction, "validations": self.validations, "policy": "prompt",
                 "cost_usd": self.cost_usd}
        with atomic_directory(final) as tmp:
            self.policy.save(tmp / FILE_NAME)
            (tmp / "trainer_state.json").write_text(json.dumps(state))
            write_manifest(tmp)  # last: a checkpoint without it is incomplete
        atomic_write_text(root / "latest", final.name)
        self._saved_step = self.step
        for old in sorted(p for p in root.glob("step_*") if p.is_dir() and p != final)[:-1]:
            shutil.rmtree(old, ignore_errors=True)  # the newest two stay, as for weights
        self.policy.save(self.run_dir / FILE_NAME)  # the current prompt, where a reader looks first
        self.log(f"checkpoint {final.name} ({self.policy.summary()})")
        self.metrics.log_event({"event": "checkpoint", "step": self.step, "checkpoint": final.name,
                                "prompt_version": self.policy.version})
        return final

    def history_table(self) -> str:
        """The run's summary: every candidate with its paired figures, accepted or not."""
        lines = [f"prompt policy: {len(self.policy.history)} candidates, "
                 f"{sum(h['accepted'] for h in self.policy.history)} accepted; {self.policy.summary()}"]
        for h in self.policy.history:
            g = h["gate"]
            lines.append(f"  step {h['step']:>3} {h['tier']:<14} {g['candidate_success']:.3f} vs {g['current_success']:.3f}"
                         f"  tools {g['candidate_tool_call_rate']:.2f} vs {g['current_tool_call_rate']:.2f}"
                         f"  diff {g['mean_difference']:+.3f} p {g['p_value']:.4f}  "
                         f"{'accepted v' + str(h['version']) if h['accepted'] else 'rejected'}")
        return "\n".join(lines)

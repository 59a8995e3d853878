"""Prometheus metrics of training runs, read from their run directories at each scrape (so the
figures survive restarts and need no shared state): the job service exposes every job's, and a
single ``agentboost train`` exposes its own with ``run.prometheus_port``. The standard client
library (``prometheus_client``) renders them.

The guide's series: ``training_jobs_created_total``, ``training_jobs_completed_total``,
``training_jobs_failed_total``, ``training_trajectory_generation_duration_seconds``,
``training_policy_update_duration_seconds``, ``training_budget_usage_dollars``,
``training_budget_limit_dollars``; and agentboost's own: ``training_jobs_cancelled_total``,
``agentboost_episodes_total`` (by status), ``agentboost_sampled_tokens_total``,
``agentboost_all_equal_group_rate``, ``agentboost_training_step``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import yaml

from ..files import iter_jsonl

BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600)


@dataclass
class RunRef:
    job: str  # the label
    run_dir: Path
    state: str  # running, completed, cancelled, failed, ...


def _steps(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [row for _, row in iter_jsonl(path, growing=True)] if path.is_file() else []


def _histogram(name: str, doc: str, values: list[float]):
    from prometheus_client.core import HistogramMetricFamily

    counts, cumulative = [], 0
    for b in BUCKETS:
        cumulative = sum(1 for v in values if v <= b)
        counts.append((str(b), cumulative))
    counts.append(("+Inf", len(values)))
    return HistogramMetricFamily(name, doc, buckets=counts, sum_value=float(sum(values)))


class RunsCollector:
    def __init__(self, runs: Callable[[], Iterable[RunRef]]):
        self.runs = runs

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        refs = list(self.runs())
        states = [r.state for r in refs]
        yield CounterMetricFamily("training_jobs_created", "Training jobs created", value=len(refs))
        for state in ("completed", "failed", "cancelled"):
            yield CounterMetricFamily(f"training_jobs_{state}", f"Training jobs {state}", value=states.count(state))
        rollout, update = [], []
        usage = GaugeMetricFamily("training_budget_usage_dollars", "Cost used so far (elapsed x run.cost_per_hour)",
                                  labels=["job"])
        limit = GaugeMetricFamily("training_budget_limit_dollars", "Cost budget (run.max_cost; 0: none)", labels=["job"])
        episodes = CounterMetricFamily("agentboost_episodes", "Training episodes by status", labels=["job", "status"])
        tokens = CounterMetricFamily("agentboost_sampled_tokens", "Sampled tokens in training", labels=["job"])
        equal = GaugeMetricFamily("agentboost_all_equal_group_rate", "Share of groups without signal, last step",
                                  labels=["job"])
        step = GaugeMetricFamily("agentboost_training_step", "Last finished training step", labels=["job"])
        # asynchronous training (rollout.max_staleness > 0, docs/async.md), the last step's; the
        # clip fraction is every run's
        last_step = {key: GaugeMetricFamily(f"agentboost_{key}", doc, labels=["job"]) for key, doc in (
            ("pg_clipfrac", "Share of trained tokens whose ratio the PPO clip cut, last step"),
            ("staleness_mean", "Mean weight versions between sampling and training, last step"),
            ("staleness_max", "Most weight versions between sampling and training, last step"),
            ("importance_ratio_mean", "Mean token importance ratio (proximal over behaviour policy), last step"),
            ("importance_truncated_frac", "Share of tokens whose importance weight was truncated, last step"))}
        for ref in refs:
            cfg_path = ref.run_dir / "config.yaml"
            run_cfg = ((yaml.safe_load(cfg_path.read_text()) or {}).get("run", {}) if cfg_path.is_file() else {})
            rows = _steps(ref.run_dir)
            rollout += [r["time_rollout_s"] for r in rows if "time_rollout_s" in r]
            update += [r["time_update_s"] for r in rows if "time_update_s" in r]
            last = rows[-1] if rows else {}
            usage.add_metric([ref.job], last.get("elapsed_s", 0.0) / 3600 * run_cfg.get("cost_per_hour", 0.0))
            limit.add_metric([ref.job], float(run_cfg.get("max_cost", 0.0)))
            by_status: dict[str, int] = {}
            for r in rows:
                for s, n in (r.get("statuses") or {}).items():
                    by_status[s] = by_status.get(s, 0) + n
            for s, n in sorted(by_status.items()):
                episodes.add_metric([ref.job, s], n)
            tokens.add_metric([ref.job], sum(r.get("sampled_tokens", 0) for r in rows))
            equal.add_metric([ref.job], last.get("all_equal_group_rate", 0.0))
            step.add_metric([ref.job], last.get("step", 0))
            for key, gauge in last_step.items():
                if last.get(key) is not None:
                    gauge.add_metric([ref.job], float(last[key]))
        yield _histogram("training_trajectory_generation_duration_seconds", "Rollout time per training step", rollout)
        yield _histogram("training_policy_update_duration_seconds", "Policy update time per training step", update)
        yield from (usage, limit, episodes, tokens, equal, step, *last_step.values())


def registry_for(runs: Callable[[], Iterable[RunRef]]):
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry()
    reg.register(RunsCollector(runs))
    return reg


def serve_run(run_dir: Path, port: int, host: str = "127.0.0.1"):
    """Expose one run's metrics at http://host:port/metrics (a daemon thread); returns the server."""
    from prometheus_client import start_http_server

    def runs():
        state = "running"
        if (run_dir / "result.json").is_file():
            state = "cancelled" if json.loads((run_dir / "result.json").read_text()).get("stop_requested") else "completed"
        return [RunRef(run_dir.name, run_dir, state)]

    server, _ = start_http_server(port, addr=host, registry=registry_for(runs))
    return server

"""What one arm serves: a policy spec (``RUN_DIR[:CHECKPOINT]``, a model directory, an embedded
model name) loaded on an engine, with the agent settings and reward of its configuration.

A run's arm takes the run's own configuration (the chat template's tool parser and reasoning
markers, the validation sampling settings it was measured with, its reward for host-side scoring),
so a checkpoint is served as it was validated; a plain model takes the defaults or ``config``.

A spec may carry a prompt policy: ``MODEL_SPEC#prompt=PATH`` (a ``prompt_policy.json``) serves the
model with that prompt (as ``serve --prompt-policy`` does), so that two arms, or two versions of a
continual loop whose weights stay as they are, differ by their prompts alone; arms of one model
share its engine (``SharedServer``), loaded once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents.chat_rendering import ChatRenderer
from ..environments.strands_env import StrandsEnv
from ..run.assembly import config_for, environment, sampling, start_policy_for_spec
from ..run.checkpoint import split_run_spec
from ..run.config import TrainConfig
from ..sampling.protocol import Sampler, SamplingParams

ARMS = ("baseline", "experiment")  # an A/B test's two arms
FEEDBACK_BOUND = 1e6  # a posted reward's magnitude (serve's feedback), where the arm's reward declares no range
PROMPT = "#prompt="  # MODEL_SPEC#prompt=PATH: the model served with a prompt policy


def split_prompt_spec(spec: str) -> tuple[str, str | None]:
    """``MODEL_SPEC#prompt=PATH`` -> (MODEL_SPEC, PATH); a spec without a prompt -> (spec, None)."""
    model, sep, prompt = spec.partition(PROMPT)
    return (model, prompt or None) if sep else (spec, None)


def with_prompt(model_spec: str, prompt_path: str | Path) -> str:
    return f"{split_prompt_spec(model_spec)[0]}{PROMPT}{prompt_path}"


class SharedServer:
    """An engine's server behind several arms: closed when the last arm that uses it closes."""

    def __init__(self, server: Any):
        self.server, self.users = server, 1

    def share(self) -> "SharedServer":
        self.users += 1
        return self

    def close(self) -> None:
        self.users -= 1
        if self.users <= 0 and self.server is not None:
            self.server.close()
            self.server = None


@dataclass
class ServedPolicy:
    """One arm: its ``sampler`` (the engine, in process for hf, over loopback HTTP for vLLM), the
    ``renderer`` of its tokenizer, the ``sampling`` settings every call uses, the trainable model's
    ``model_options``, and ``env`` (its reward, for feedback the host scores)."""

    name: str
    spec: str
    description: str
    engine: str
    sampler: Sampler
    renderer: ChatRenderer
    sampling: SamplingParams
    env: StrandsEnv | None
    model_options: dict[str, Any] = field(default_factory=dict)
    server: Any = None  # the engine's server (a SharedServer), closed with the last policy that uses it
    prompt_policy: Any = None  # a PromptPolicy the spec names (MODEL_SPEC#prompt=PATH), applied to every request
    # the verified identity of the weights served (run/verify.py verify_served): version and digest
    identity: dict[str, Any] | None = None

    @property
    def system_fingerprint(self) -> str | None:
        """What answers carry as OpenAI's ``system_fingerprint``: the served weights' version (a
        run's checkpoint step where there is one) and the digest the engine reported for them."""
        if not self.identity:
            return None
        step = self.identity.get("checkpoint_step")
        return f"agentboost-{'step' if step is not None else 'v'}{step if step is not None else self.identity['version']}" \
               f"-{self.identity['digest']}"

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def sharing(self, name: str, spec: str) -> "ServedPolicy":
        """The same engine under another spec of the same model (another prompt policy, or none)."""
        import dataclasses

        _, prompt = split_prompt_spec(spec)
        policy = _prompt(prompt)
        return dataclasses.replace(self, name=name, spec=spec, server=self.server.share(), prompt_policy=policy,
                                   description=_described(split_prompt_spec(self.description)[0], policy, prompt))


def _prompt(path: str | None):
    if path is None:
        return None
    from ..run.prompt_policy import load_prompt_policy

    return load_prompt_policy(path)


def _described(description: str, policy, path: str | None) -> str:
    return f"{description}{PROMPT}{path} ({policy.summary()})" if policy is not None else description


def serving_config(spec: str, config: str | None = None, overrides: list[str] = ()) -> TrainConfig:
    """The configuration an arm serves with: ``config`` if given, else the run's own, else defaults."""
    return config_for(spec, config, list(overrides))


def load_served_policy(name: str, spec: str, engine: str = "hf", config: str | None = None,
                       overrides: list[str] = (), max_batch_size: int = 16, seed: int = 0,
                       log=print) -> ServedPolicy:
    from ..sampling.hf_engine import EngineSampler
    from ..sampling.http_sampler import HttpSampler

    full_spec, (spec, prompt) = spec, split_prompt_spec(spec)
    prompt_policy = _prompt(prompt)  # a bad file fails before the model loads
    cfg = serving_config(spec, config, overrides)
    engine_name, server, desc, _, tok = start_policy_for_spec(spec, cfg, seed=seed, slots=max_batch_size,
                                                       max_batch_size=max_batch_size, engine=engine)
    try:
        if engine_name == "hf":
            sampler: Sampler = EngineSampler(server.engine)
        else:
            sampler = HttpSampler(server.url, policy_file=str(server.policy_file))
        # the settings the checkpoint was validated with; greedy stays greedy (no seed needed)
        params = sampling(cfg, "validation")
        trained = (Path(split_run_spec(spec)[0]) / "config.yaml").is_file()
        env = environment(cfg) if cfg.reward.name else None
        desc = _described(desc, prompt_policy, prompt)
        identity = getattr(server, "identity", None)
        verified = (f", weights {identity['digest']}" + (" as the run trained them" if identity["run_verified"] else "")
                    if identity else "")
        log(f"arm {name}: {desc} ({engine_name} engine{', trained' if trained else ''}{verified})")
        return ServedPolicy(name=name, spec=full_spec, description=desc, engine=engine_name, sampler=sampler,
                            renderer=ChatRenderer(tok), sampling=params, env=env, server=SharedServer(server),
                            identity=identity, prompt_policy=prompt_policy,
                            model_options={"tool_parser": cfg.agent.tool_parser, "reasoning": cfg.agent.reasoning})
    except BaseException:
        server.close()
        raise

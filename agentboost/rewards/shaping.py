"""Optional shaping terms, kept apart from the outcome reward and capped per episode.

Off unless configured. The documented preset (``ShapingConfig.preset()``): +0.1 per successful
tool call, +0.05 per verification step, -0.01 per model call (step), each capped so that a
policy cannot farm them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..episodes.record import Episode


@dataclass(frozen=True)
class ShapingConfig:
    tool_success: float = 0.0
    tool_success_cap: float = 0.0
    verification: float = 0.0
    verification_cap: float = 0.0
    step_penalty: float = 0.0
    step_penalty_cap: float = 0.0
    # tool outcomes that count as a verification step (a tool that checked the agent's work)
    verification_outcomes: tuple[str, ...] = field(default=("verified",))

    @classmethod
    def preset(cls) -> "ShapingConfig":
        return cls(tool_success=0.1, tool_success_cap=0.3, verification=0.05, verification_cap=0.1,
                   step_penalty=-0.01, step_penalty_cap=-0.1)

    def __post_init__(self) -> None:
        for name in ("tool_success", "verification"):
            if getattr(self, name) < 0 or getattr(self, f"{name}_cap") < 0:
                raise ValueError(f"shaping {name} and its cap must be >= 0")
        if self.step_penalty > 0 or self.step_penalty_cap > 0:
            raise ValueError("shaping step_penalty and its cap must be <= 0")


def shaping_terms(cfg: ShapingConfig, episode: Episode) -> dict[str, float]:
    ok_calls = sum(1 for t in episode.tool_calls if t.ok)
    verified = sum(1 for t in episode.tool_calls if t.ok and t.outcome in cfg.verification_outcomes)
    terms = {}
    if cfg.tool_success:
        terms["tool_success"] = min(cfg.tool_success * ok_calls, cfg.tool_success_cap)
    if cfg.verification:
        terms["verification"] = min(cfg.verification * verified, cfg.verification_cap)
    if cfg.step_penalty:
        terms["step_penalty"] = max(cfg.step_penalty * len(episode.calls), cfg.step_penalty_cap)
    return terms

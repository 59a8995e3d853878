"""A sampler that replays scripted turns through the sampler protocol.

For testing agents, tools and rewards without a model, and for measuring framework overhead with
a zero-latency policy. Text is encoded with the policy's real tokenizer, so episodes are
token-exact exactly as with a model.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Callable, Sequence

from .protocol import SamplerError, SampleResult, SamplingParams


@dataclass
class ScriptedTurn:
    text: str = ""
    finish_reason: str = "stop"  # "stop" appends the end-of-turn token; "length" cuts the turn
    delay_s: float = 0.0
    error: str | None = None  # raise SamplerError with this message instead of answering


Script = Sequence[ScriptedTurn | str] | Callable[[list[int], int], ScriptedTurn | str]


class ScriptedSampler:
    def __init__(self, script: Script, tokenizer, end_token_id: int | None = None, logprob: float = -0.5):
        self.script = script
        self.tokenizer = tokenizer
        self.end_token_id = end_token_id if end_token_id is not None else tokenizer.eos_token_id
        self.logprob = logprob
        self.calls = 0
        self.prompts: list[list[int]] = []

    def _turn(self, prompt_ids: list[int], index: int) -> ScriptedTurn:
        if callable(self.script):
            turn = self.script(prompt_ids, index)
        else:
            if index >= len(self.script):
                raise SamplerError(f"the script has {len(self.script)} turns; call {index + 1} asked for more")
            turn = self.script[index]
        return ScriptedTurn(text=turn) if isinstance(turn, str) else turn

    async def sample(self, prompt_ids: list[int], params: SamplingParams) -> SampleResult:
        index = self.calls
        self.calls += 1
        self.prompts.append(list(prompt_ids))
        if params.seed is None:
            turn = self._turn(prompt_ids, index)
        else:  # a seeded request: the script's random numbers come from its seed, as a seeded server's do
            state = random.getstate()
            random.seed(params.seed)
            try:
                turn = self._turn(prompt_ids, index)
            finally:
                random.setstate(state)  # the worker's own stream goes on as if the request had not drawn
        if turn.delay_s:
            await asyncio.sleep(turn.delay_s)
        if turn.error:
            raise SamplerError(turn.error)
        ids = list(self.tokenizer(turn.text, add_special_tokens=False)["input_ids"])
        finish = turn.finish_reason
        if finish == "stop":
            ids.append(self.end_token_id)
        if len(ids) > params.max_new_tokens:
            ids, finish = ids[: params.max_new_tokens], "length"
        return SampleResult(response_ids=ids, logprobs=[self.logprob] * len(ids), finish_reason=finish)

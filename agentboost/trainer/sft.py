"""Supervised fine-tuning on selected episodes: rejection-sampling fine-tuning (RFT) when the
episodes are the policy's own successes (``agentboost export --success-only``).

Each segment of each episode is one row; its sampled tokens (loss mask 1) are trained with
cross-entropy, averaged per row then over rows, so long answers do not outweigh short ones. The
result is a full model directory (LoRA merged) that ``model.path`` / ``--model`` accept; it is
written under a temporary name and renamed when complete.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..episodes.record import SCHEMA_VERSION
from ..errors import InputError
from ..files import atomic_directory, iter_jsonl
from ..progress import progress_bar
from .batch import TrainRow, micro_batches, pad_batch
from .loss import token_logprobs


class SFTDataError(InputError):
    pass


@dataclass
class SFTConfig:
    model: str = "smollm2-135m-instruct"
    lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    epochs: int = 1
    lr: float = 1e-4
    batch_rows: int = 16  # rows per optimizer step
    micro_batch_tokens: int = 4096
    grad_clip: float = 1.0
    seed: int = 0


def text_level_row(rec: dict, renderer, row_id: str) -> TrainRow | None:
    """A text-level episode (a chat model's, ``Episode.text_level``: messages, no tokens) as one SFT
    row: its conversation rendered with the student's chat template (its system prompt and tools as
    the episode recorded them), the assistant turns under mask 1. The text is what the teacher
    wrote; the tokens are the student's rendering of it (supervised learning needs no more)."""
    meta = (rec.get("metadata") or {}).get("text_level") or {}
    hf, tools = renderer.to_hf_messages(rec.get("messages") or [], meta.get("system_prompt"), meta.get("tool_specs"))
    ids: list[int] = []
    mask: list[int] = []
    done = ""
    for i, m in enumerate(hf):
        assistant = m["role"] == "assistant"
        before = renderer.render(hf[:i], tools, add_generation_prompt=assistant) if i else ""
        upto = renderer.render(hf[:i + 1], tools, add_generation_prompt=False)
        if not (before.startswith(done) and upto.startswith(before)):
            raise ValueError("the chat template does not extend turn by turn")
        for text, m1 in ((before[len(done):], 0), (upto[len(before):], int(assistant))):
            piece = renderer.encode(text) if text else []
            ids += piece
            mask += [m1] * len(piece)
        done = upto
    return TrainRow(row_id, "sft", ids, mask, [0.0] * len(ids)) if any(mask) else None


def load_sft_rows(paths: list[str | os.PathLike[str]], tokenizer: str | None = None) -> list[TrainRow]:
    """Rows from episode records or ``agentboost export`` files (both carry ``segments``), and from
    text-level episodes (a chat model's, e.g. ``eval``'s baseline), rendered with ``tokenizer``'s
    chat template (the student's)."""
    rows = []
    renderer = None
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise SFTDataError(f"{p}: no such file")
        for lineno, rec in iter_jsonl(p, SFTDataError):
            version = rec.get("schema_version", SCHEMA_VERSION) if isinstance(rec, dict) else None
            if version != SCHEMA_VERSION:  # an episode record of another schema: refused, as every reader does
                raise SFTDataError(f"{p}:{lineno}: episode schema_version {version!r} is not supported "
                                   f"(expected {SCHEMA_VERSION})")
            try:
                if ((rec.get("metadata") or {}).get("text_level")):
                    if renderer is None:
                        from transformers import AutoTokenizer

                        from ..agents.chat_rendering import ChatRenderer

                        if tokenizer is None:
                            raise ValueError("a text-level episode needs the student's tokenizer to be rendered")
                        renderer = ChatRenderer(AutoTokenizer.from_pretrained(tokenizer))
                    row = text_level_row(rec, renderer, f"{rec.get('episode_id', lineno)}/text")
                    if row is not None:
                        rows.append(row)
                    continue
                segments = rec["segments"]
                for k, seg in enumerate(segments):
                    ids, mask = list(seg["input_ids"]), list(seg["loss_mask"])
                    if len(ids) != len(mask):
                        raise ValueError("input_ids and loss_mask differ in length")
                    if any(mask):
                        rows.append(TrainRow(f"{rec.get('episode_id', lineno)}/{k}", "sft", ids, mask, [0.0] * len(ids)))
            except (ValueError, KeyError, TypeError) as e:
                raise SFTDataError(f"{p}:{lineno}: not an episode with token segments: {e}") from e
    return rows


def nll(model, rows: list[TrainRow], pad_id: int) -> tuple[torch.Tensor, int]:
    batch = pad_batch(rows, pad_id, device=next(model.parameters()).device)
    logp = token_logprobs(model, batch, temperature=1.0)
    m = batch["response_mask"]
    per_row = -(logp * m).sum(1) / m.sum(1).clamp(min=1)
    return per_row.mean(), int(m.sum())


def train_supervised(model, rows: list[TrainRow], pad_id: int, *, epochs: int, lr: float, batch_rows: int,
                     micro_batch_tokens: int, grad_clip: float, log=print, label: str = "sft") -> list[dict[str, Any]]:
    """Cross-entropy on the rows' sampled tokens, ``epochs`` passes in a seeded shuffled order, one
    AdamW step per ``batch_rows`` rows (its own optimizer); the model's trainable parameters change
    in place. ``agentboost sft`` and the trainer's warm start are this loop. Returns one record per
    optimizer step."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.train()
    steps_per_epoch = -(-len(rows) // batch_rows)
    history: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with progress_bar(label, epochs * steps_per_epoch) as advance:
        for epoch in range(epochs):
            order = list(rows)
            random.shuffle(order)
            for start in range(0, len(order), batch_rows):
                step_rows = order[start:start + batch_rows]
                optimizer.zero_grad(set_to_none=True)
                loss_sum, tokens = 0.0, 0
                for mb in micro_batches(step_rows, micro_batch_tokens):
                    loss, n = nll(model, mb, pad_id)
                    (loss * len(mb) / len(step_rows)).backward()
                    loss_sum += float(loss.detach()) * len(mb) / len(step_rows)
                    tokens += n
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip))
                optimizer.step()
                history.append({"step": len(history) + 1, "epoch": epoch + 1, "loss": loss_sum, "tokens": tokens,
                                "grad_norm": grad_norm, "elapsed_s": time.perf_counter() - t0})
                advance()
            log(f"{label} epoch {epoch + 1}/{epochs}: loss {history[-1]['loss']:.4f} "
                f"(first step {history[0]['loss']:.4f}), {time.perf_counter() - t0:.0f}s")
    model.eval()
    return history


def run_sft(rows: list[TrainRow], cfg: SFTConfig, out: str | os.PathLike[str], overwrite: bool = False,
            log=print) -> dict[str, Any]:
    from ..models.loading import load_policy

    out = Path(out)
    if out.exists() and not overwrite:  # checked before the work, not after
        raise FileExistsError(f"{out} exists")
    if not rows:
        raise SFTDataError("the files hold no episode with a sampled token to train on")
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model, tok = load_policy(cfg.model)
    model.to("cuda" if torch.cuda.is_available() else "cpu")
    if cfg.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, task_type="CAUSAL_LM",
                                                 target_modules=list(cfg.lora_target_modules)))
    history = train_supervised(model, rows, tok.pad_token_id, epochs=cfg.epochs, lr=cfg.lr,
                               batch_rows=cfg.batch_rows, micro_batch_tokens=cfg.micro_batch_tokens,
                               grad_clip=cfg.grad_clip, log=log)
    if cfg.lora:
        model = model.merge_and_unload()
    with atomic_directory(out) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        with open(tmp / "sft_metrics.jsonl", "w", encoding="utf-8") as f:
            for h in history:
                f.write(json.dumps(h) + "\n")
        (tmp / "sft_config.json").write_text(json.dumps({**cfg.__dict__, "rows": len(rows)}, indent=2))
    return {"rows": len(rows), "steps": len(history), "first_loss": history[0]["loss"],
            "last_loss": history[-1]["loss"], "out": str(out)}

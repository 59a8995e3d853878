"""bfcl-eval's own evaluation of model outputs, as its `bfcl evaluate` runs it: for each category,
``eval_runner.evaluate_task`` with the handler of a function-calling OpenAI model registered in BFCL
(``gpt-4o-2024-11-20-FC``: dots in function names replaced by underscores, as agentboost's tools do),
writing BFCL's score files; the verdict of each entry is read back from them.

Run as a script (a process of its own, so that nothing of agentboost's import of bfcl-eval is in
it): ``python official_eval.py OUTPUTS.json SCORE_DIR VERDICTS.json`` where OUTPUTS is ``{category:
[[{"id", "result"}, ...] per round]}``; writes ``{category: [{id: valid} per round]}`` to VERDICTS.json
(BFCL's runner prints its progress on stdout).

bfcl-eval's model table imports every provider SDK's handler; the SDKs agentboost does not install
(anthropic, mistralai, cohere, google-genai, writer, qwen-agent, tree-sitter, datamodel-code-generator)
get inert stand-ins here, as tau2's test gives litellm one: the evaluation never calls them. Nothing
of the evaluation itself is replaced.
"""

import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile
import types

STAND_INS = ("anthropic", "mistralai", "cohere", "google.genai", "writerai", "qwen_agent", "tree_sitter",
             "tree_sitter_java", "tree_sitter_javascript", "datamodel_code_generator", "serpapi", "bs4", "html2text")
MODEL = "gpt-4o-2024-11-20-FC"


class _InertMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _InertMeta(name, (_Inert,), {})

    def __getitem__(cls, item):
        return cls


class _Inert(metaclass=_InertMeta):
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Inert()

    def __getattr__(self, name):
        return _Inert()


class _InertModule(types.ModuleType):
    __path__: list = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        cls = _InertMeta(name, (_Inert,), {})
        setattr(self, name, cls)
        return cls


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Only for what the real import system could not find (it sits last on the path)."""

    def find_spec(self, name, path, target=None):
        if any(name == s or name.startswith(s + ".") for s in STAND_INS):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _InertModule(spec.name)

    def exec_module(self, module):
        pass


def main(outputs_path: str, score_root: str, verdicts_path: str) -> None:
    sys.meta_path.append(_Finder())
    os.environ["BFCL_PROJECT_ROOT"] = score_root
    os.environ.setdefault("OPENAI_API_KEY", "not-used")  # the handler makes a client it never calls
    from bfcl_eval.eval_checker import eval_runner
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.utils import load_file, sort_key

    handler = eval_runner.get_handler(MODEL)
    verdicts = {}
    with open(outputs_path) as f:
        outputs = json.load(f)
    for category, rounds in outputs.items():
        verdicts[category] = []
        for i, model_result in enumerate(rounds):
            model_result = sorted(model_result, key=sort_key)  # as `bfcl evaluate` reads a result file
            # each round is another evaluation: BFCL keeps a multi-turn entry's API instances in a
            # module table keyed by model and entry, which one run of `bfcl evaluate` fills once
            table = vars(multi_turn_utils)
            for key in [k for k in table if k.endswith("_instance")]:
                del table[key]
            score_dir = __import__("pathlib").Path(tempfile.mkdtemp(dir=score_root, prefix=f"{category}-{i}-"))
            eval_runner.evaluate_task(category, None, score_dir, model_result, MODEL, handler, {},
                                      allow_missing=True)
            files = list(score_dir.rglob(f"BFCL_v4_{category}_score.json"))
            assert len(files) == 1, files
            rows = load_file(files[0])
            header, failed = rows[0], {r["id"] for r in rows[1:]}
            assert header["total_count"] == len(model_result), header
            verdicts[category].append({r["id"]: r["id"] not in failed for r in model_result})
    with open(verdicts_path, "w") as f:
        json.dump(verdicts, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])

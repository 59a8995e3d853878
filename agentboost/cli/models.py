"""``models prepare`` and ``models list``: the embedded models and their cache."""

from __future__ import annotations

import time

from .common import add_command


def add_models(sub) -> None:
    p = sub.add_parser("models", help="manage the embedded models", description="Manage the embedded models.")
    msub = p.add_subparsers(dest="models_cmd", metavar="COMMAND", required=True)
    prep = add_command(msub, "prepare", cmd_models_prepare,
                       help="dequantise an embedded model into the cache (atomic, verified)",
                       description="Dequantise an embedded model's GGUF into the cache directory "
                                   "(AGENTBOOST_CACHE_DIR, default ~/.cache/agentboost).")
    prep.add_argument("name", nargs="?", default="smollm2-135m-instruct", help="embedded model (default: smollm2-135m-instruct)")
    prep.add_argument("--cache-dir", help="cache directory (overrides AGENTBOOST_CACHE_DIR)")
    prep.add_argument("--force", action="store_true", help="prepare again even if a valid cache exists")
    ls = add_command(msub, "list", cmd_models_list, help="list embedded models and whether they are prepared",
                     description="List embedded models and their cache state.")
    ls.add_argument("--cache-dir", help="cache directory (overrides AGENTBOOST_CACHE_DIR)")


def cmd_models_prepare(args) -> int:
    from ..models.embedded import prepare_embedded

    t0 = time.perf_counter()
    path = prepare_embedded(args.name, args.cache_dir, force=args.force)
    print(f"{args.name}: {path} ({time.perf_counter() - t0:.1f} s)")
    return 0


def cmd_models_list(args) -> int:
    from ..models.embedded import EMBEDDED_MODELS, cache_root, verify_cache

    for name, spec in EMBEDDED_MODELS.items():
        path = cache_root(args.cache_dir) / "models" / name
        state = "prepared" if path.is_dir() and verify_cache(path) is None else "not prepared"
        print(f"{name}\t{spec.distribution}\t{state}\t{path}")
    return 0

"""The command line as a package (issue 24): every command group parses, the entry points work, and
``serve``, ``rollout``, the trainer and ``eval`` all start their policy server through
``sampling.policy_server.start_policy_server`` with the arguments they had before."""

from types import SimpleNamespace

import pytest
from helpers import cli

import agentboost.sampling.vllm_server as vllm_server
from agentboost import __version__
from agentboost.cli import UsageError, build_parser, main
from agentboost.errors import InputError
from agentboost.run.assembly import server_options
from agentboost.run.config import TrainConfig
from agentboost.sampling import policy_server
from agentboost.sampling.policy_server import VLLMOptions, start_policy_server

COMMANDS = ["init", "rollout", "models", "serve", "check", "data", "score", "stats", "sandbox", "train", "config", "plot", "export",
            "export-model", "ab", "sft", "eval", "bench", "continual", "jobs"]
SUBCOMMANDS = [["models", "prepare"], ["models", "list"], ["data", "prepare"], ["data", "verl"], ["sandbox", "info"],
               ["jobs", "serve"], ["ab", "report"], ["ab", "split"], ["bench", "list"], ["bench", "run"], ["bench", "report"],
               ["bench", "rescore"], ["continual", "run"], ["continual", "status"], ["continual", "propose"]]


@pytest.mark.parametrize("command", [[c] for c in COMMANDS] + SUBCOMMANDS, ids=" ".join)
def test_every_command_has_its_help(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([*command, "--help"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: agentboost {' '.join(command)}")


def test_the_commands_are_listed_in_their_order():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == COMMANDS


def test_version_and_python_dash_m():
    r = cli("--version", timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"agentboost {__version__}"
    r = cli(timeout=120)
    assert r.returncode == 2 and "the following arguments are required: COMMAND" in r.stderr


def test_bad_input_is_one_line_with_exit_code_2(capsys, tmp_path):
    assert issubclass(UsageError, InputError)
    assert main(["train"]) == 2
    assert capsys.readouterr().err == "agentboost train: error: a CONFIG file is required (or --resume RUN_DIR)\n"
    assert main(["check", str(tmp_path / "nope.jsonl")]) == 2
    assert "agentboost check: error:" in capsys.readouterr().err


def test_shared_options_keep_their_types_and_defaults():
    args = build_parser().parse_args(["sft", "a.jsonl", "--out", "m"])
    assert (args.lora_r, args.epochs, args.lr, args.batch_rows, args.micro_batch_tokens, args.seed) == (16, 1, 1e-4, 16, 4096, 0)
    args = build_parser().parse_args(["eval", "--model", "m", "--samples", "3", "--alpha", "0.1"])
    assert (args.samples, args.alpha, args.seed, args.workers, args.slots, args.out, args.tasks) == (3, 0.1, 0, 1, 16, "eval", None)
    args = build_parser().parse_args(["rollout", "--seed", "5", "--timeout", "9"])
    assert (args.seed, args.timeout, args.max_batch, args.sampler_url, args.chat_template_kwargs) == (5, 9.0, 32, None, "{}")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["rollout", "--samples", "x"])


# -- the one way to start a policy server ----------------------------------------------------------
class Recorder:
    """Stands in for HFPolicyServer's constructors and VLLMPolicyServer: records how each was called."""

    def __init__(self, monkeypatch, vllm=True):
        self.calls, self.published = [], []
        rec = self

        class FakeVLLM:
            def __init__(self, model_dir, **kw):
                rec.calls.append(("vllm", str(model_dir), kw))
                self.policy_file, self.url = "policy.json", "http://vllm"

            def start(self, version=0, model=None):
                rec.calls.append(("vllm.start", version, model))
                return self

        monkeypatch.setattr(vllm_server, "VLLMPolicyServer", FakeVLLM)
        monkeypatch.setattr(vllm_server, "find_vllm_python", lambda configured=None: "/vllm/python" if vllm else None)
        monkeypatch.setattr(vllm_server, "is_cpu_build", lambda python: True)
        class FakeHF:
            """The started hf server: its engine's model, and the version it is told to report."""
            engine = type("Engine", (), {"model": "the-model"})()

            def publish(self, model, version):
                rec.published.append((model, version))  # apart from the constructors' calls

            def __eq__(self, other):
                return other == "hf-server"

        monkeypatch.setattr(policy_server.HFPolicyServer, "start",
                            classmethod(lambda cls, *a, **kw: rec.calls.append(("hf.start", a, kw)) or FakeHF()))
        monkeypatch.setattr(policy_server.HFPolicyServer, "from_pretrained",
                            classmethod(lambda cls, *a, **kw: rec.calls.append(("hf.load", a, kw)) or FakeHF()))
        import agentboost.models.loading as loading

        monkeypatch.setattr(loading, "resolve_model_path", lambda name: f"/cache/{name}")


def test_serve_and_rollout_start_the_server_as_before(monkeypatch):
    rec = Recorder(monkeypatch)
    # serve, hf: the model loaded by name, served under it
    assert start_policy_server("hf", "smol", served_name="smol", max_batch_size=8, host="0.0.0.0", port=8000) == \
        ("hf", "hf-server")
    assert rec.published == [("the-model", 0)]  # its answers report version 0
    assert rec.calls.pop() == ("hf.load", ("smol", 8), {"batch_wait_s": 0.01, "host": "0.0.0.0", "port": 8000,
                                                         "model_name": "smol"})
    # serve, vllm: vLLM's defaults but the host, port and name
    start_policy_server("vllm", "smol", served_name="smol", max_batch_size=8, host="0.0.0.0", port=8000)
    assert rec.calls[0] == ("vllm", "/cache/smol", {
        "workdir": None, "lora_rank": 0, "full_weight_sync": False, "merge_lora": False, "python": "/vllm/python",
        "kv_cache_gib": 1.0, "max_model_len": None, "startup_timeout_s": 600.0, "seed": 0, "host": "0.0.0.0",
        "port": 8000, "served_name": "smol"})
    assert rec.calls[1] == ("vllm.start", 0, None)
    rec.calls.clear()
    # rollout: hf under the model's name on a free port; vllm as "base" with max(16, slots) sequences
    start_policy_server("hf", "smol", seed=0, slots=24, max_batch_size=24)
    assert rec.calls.pop() == ("hf.load", ("smol", 24), {"batch_wait_s": 0.01, "host": "127.0.0.1", "port": 0})
    start_policy_server("auto", "smol", seed=3, slots=8, max_batch_size=8)
    assert rec.calls[0][2]["max_num_seqs"] == 16 and rec.calls[0][2]["seed"] == 3
    assert "served_name" not in rec.calls[0][2] and rec.calls[0][2]["port"] is None


def test_the_trainer_and_eval_start_the_server_as_before(monkeypatch):
    rec = Recorder(monkeypatch)
    cfg = TrainConfig()
    opts = server_options(cfg)
    assert opts["batch_wait_s"] == 0.1 and opts["engine"] == "hf"
    assert opts["vllm"] == VLLMOptions(python=None, lora_sync="auto", kv_cache_gib=2.0, max_model_len=None,
                                       startup_timeout_s=900.0)
    model = SimpleNamespace(name="policy")
    assert start_policy_server(model_path="/m", model=model, tokenizer="tok", seed=1, slots=8, max_batch_size=8,
                               **opts) == ("hf", "hf-server")
    assert rec.calls.pop() == ("hf.start", (model, "tok", 8), {"batch_wait_s": 0.1, "host": "127.0.0.1", "port": 0})
    cfg.rollout.engine = "vllm"
    # a LoRA checkpoint (eval of a run): merged on the CPU build, put on the server at once
    start_policy_server(model_path="/m", model=model, tokenizer="tok", seed=1, slots=4, max_batch_size=4,
                        lora_rank=8, weights_version=1, workdir="w", **server_options(cfg))
    assert rec.calls[0] == ("vllm", "/m", {
        "workdir": "w", "lora_rank": 8, "full_weight_sync": False, "merge_lora": True, "python": "/vllm/python",
        "kv_cache_gib": 2.0, "max_model_len": None, "startup_timeout_s": 900.0, "seed": 1, "host": "127.0.0.1",
        "port": None, "max_num_seqs": 16})
    assert rec.calls[1] == ("vllm.start", 1, model)


def test_vllm_without_vllm_says_how_to_install_it(monkeypatch):
    Recorder(monkeypatch, vllm=False)
    with pytest.raises(vllm_server.VLLMNotInstalled, match="setup.sh --vllm"):
        start_policy_server("vllm", "smol")
    assert start_policy_server("auto", "smol")[0] == "hf"


def test_every_option_of_every_command_says_what_it_is():
    import argparse

    from agentboost.cli import build_parser

    missing, texts = [], []

    def walk(parser, path):
        texts.append(parser.format_help())
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, [*path, name])
            elif not a.help and a.dest != "help":
                missing.append(f"{' '.join(path)} {'/'.join(a.option_strings) or a.dest}")

    walk(build_parser(), [])
    assert not missing, missing
    assert not [t for t in texts if "%%" in t]  # a description is not %-formatted: 95%% shows as is

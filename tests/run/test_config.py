"""Training configuration: validation before anything starts, overrides, the saved config."""

import pytest

from agentboost.run.config import (
    ConfigError,
    config_from_dict,
    load_config,
    save_config,
)

SMOKE = "examples/quickstart/smoke.yaml"


def test_misspelt_key_names_the_closest_valid_key(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown configuration key 'optim.learning_rat'; did you mean 'optim.lr'?"):
        load_config(SMOKE, ["optim.learning_rat=0.1"])
    f = tmp_path / "c.yaml"
    f.write_text("data:\n  train_file: x.jsonl\n  groupsize: 4\n")
    with pytest.raises(ConfigError, match="did you mean 'data.group_size'"):
        load_config(f)
    f.write_text("modle:\n  path: x\n")
    with pytest.raises(ConfigError, match="did you mean 'model.path'"):
        load_config(f)


def test_types_choices_and_required(tmp_path):
    with pytest.raises(ConfigError, match="run.steps must be an integer"):
        load_config(SMOKE, ["run.steps=two"])
    with pytest.raises(ConfigError, match="algorithm.adv_estimator must be one of"):
        load_config(SMOKE, ["algorithm.adv_estimator=ppo2"])
    with pytest.raises(ConfigError, match="data.group_size must be >= 2 for grpo"):
        load_config(SMOKE, ["data.group_size=1"])
    with pytest.raises(ConfigError, match="data.train_file is required"):
        load_config(None)
    with pytest.raises(ConfigError, match="must look like key.sub=value"):
        load_config(SMOKE, ["run.steps"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_overrides_relative_paths_and_round_trip(tmp_path):
    cfg = load_config(SMOKE, ["run.steps=7", "optim.lr=3e-5", "model.lora=false", "agent.tools=[a:b, c:d]"])
    assert cfg.run.steps == 7 and cfg.optim.lr == 3e-5 and cfg.model.lora is False
    assert cfg.agent.tools == ["a:b", "c:d"]
    assert cfg.data.train_file.endswith("examples/quickstart/data/train.jsonl")
    save_config(cfg, tmp_path / "config.yaml")
    import yaml

    assert config_from_dict(yaml.safe_load((tmp_path / "config.yaml").read_text())) == cfg

"""The configuration reference is the schema's: every key has a type, a default and a meaning,
``docs/configuration.md`` is exactly what ``agentboost config --markdown`` prints, and every key it
lists is one ``train`` accepts with its default."""

import json

from helpers import REPO, cli

from agentboost.run.config import load_config
from agentboost.run.config_reference import markdown, rows


def test_every_key_has_a_meaning_and_takes_its_default():
    rs = rows()
    assert len(rs) > 70 and all(r["meaning"] and r["type"] for r in rs), [r["key"] for r in rs if not r["meaning"]]
    defaults = load_config(None, [], for_training=False).to_dict()
    for r in rs:
        section, name = r["key"].split(".")
        value = defaults[section][name]
        load_config(None, [f"{r['key']}={json.dumps(value)}"], for_training=False)  # accepted as it is


def test_the_docs_page_is_the_generated_reference():
    assert (REPO / "docs" / "configuration.md").read_text() == markdown(), \
        "docs/configuration.md is stale: run `agentboost config --markdown > docs/configuration.md`"
    r = cli("config", timeout=120)
    assert r.returncode == 0 and "optim.lr (float, default 0.0001) [> 0 and <= 1; finite]" in r.stdout

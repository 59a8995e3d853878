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


def test_every_field_carries_its_own_help_bounds_and_choices():
    # the reference is read from the fields alone (schema.option): no comment, no side table
    import dataclasses

    from agentboost.run.config_reference import sections
    from agentboost.schema import bounds_of, choices_of, describe_bounds, help_of, title_of

    by_key = {r["key"]: r for r in rows()}
    for name, cls in sections():
        assert title_of(cls), f"section {name} has no docstring title"
        for f in dataclasses.fields(cls):
            row = by_key[f"{name}.{f.name}"]
            assert help_of(f) and row["meaning"] == help_of(f), row["key"]
            if choices_of(f) is not None:
                assert row["allowed"] == "one of " + ", ".join(choices_of(f)), row["key"]
            elif bounds_of(f) is not None:
                assert row["allowed"].startswith(describe_bounds(bounds_of(f))), row["key"]

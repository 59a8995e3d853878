"""The Grafana dashboard shipped in assets/grafana/: Grafana's import-API shape, and every series its
queries read is one the job service's /metrics serves (scraped from a real service), with the
labels that series has."""

import json
import re
import urllib.request

from helpers import REPO, AppThread

from agentboost.jobs.service import make_app
from agentboost.jobs.store import JobStore

DASHBOARD = REPO / "assets" / "grafana" / "training-dashboard.json"


def test_dashboard_reads_only_served_series(tmp_path):
    body = json.loads(DASHBOARD.read_text())
    dash = body["dashboard"]
    assert body["overwrite"] is True and dash["uid"] and dash["title"]
    svc = AppThread(make_app(JobStore(tmp_path / "jobs")))
    try:
        token = (tmp_path / "jobs" / "token").read_text().strip()
        req = urllib.request.Request(svc.url + "/metrics", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
    finally:
        svc.stop()
    types = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE"))
    served = set(types) | {f"{n}_{s}" for n, t in types.items() if t == "histogram" for s in ("sum", "count", "bucket")}
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs.append(next(v for v in dash["templating"]["list"] if v["name"] == "job")["definition"])
    used = {name for e in exprs for name in re.findall(r"\b(?:training|agentboost)_[a-z_]+", e)}
    assert used and used <= served, used - served
    # every served series is on the dashboard
    assert {n if types[n] != "histogram" else f"{n}_sum" for n in types} <= used
    # per-job series are filtered by the $job variable, on the label the service sets
    for e in exprs:
        if re.search(r"training_budget|agentboost_(training_step|sampled|episodes|all_equal)", e) and "label_values" not in e:
            assert 'job=~"$job"' in e, e
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])

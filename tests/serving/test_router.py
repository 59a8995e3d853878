"""The serving router with scripted arms (the real router, gateway translation, Strands client and
sockets; a scripted sampler stands in for the model so that every answer is known): tool calls
streamed and not, sticky arms, a live split change, feedback, the guards and Prometheus per arm.
The statistics and the best-checkpoint rules without a model."""

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from agentboost.agents.chat_rendering import ChatRenderer
from agentboost.evaluation.statistics import paired_comparison, unpaired_comparison
from agentboost.sampling.protocol import SamplingParams
from agentboost.sampling.scripted import ScriptedSampler
from agentboost.serving.policies import ServedPolicy
from agentboost.serving.report import ab_report, report_text
from agentboost.serving.router import Router, ServeInputError, check_bind, draw

TOKEN = "s3cret"
PARAMS = SamplingParams(temperature=0.0, max_new_tokens=64)


def arm(name, tok, answer):
    sampler = ScriptedSampler(lambda ids, i: answer, tok)
    return ServedPolicy(name=name, spec=name, description=f"scripted {name}", engine="scripted", sampler=sampler,
                        renderer=ChatRenderer(tok), sampling=PARAMS, env=None)


def post(url, body, token=TOKEN, headers=None, raw=None):
    req = urllib.request.Request(url, data=raw if raw is not None else json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {}),
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


@pytest.fixture(scope="module")
def smollm2_tok(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_path))


def test_ab_router_over_http(tmp_path, smollm2_tok):
    from strands import Agent
    from strands.models.openai import OpenAIModel

    from agentboost.testing.faults import add

    call = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    base = arm("baseline", smollm2_tok, "The answer is 5.")
    # the experiment calls the tool on a first turn, answers after the tool's result
    exp = arm("experiment", smollm2_tok, "done")
    exp.sampler.script = lambda ids, i: call if "tool_response" not in smollm2_tok.decode(ids[-40:]) else "It is 5."
    router = Router({"baseline": base, "experiment": exp}, split=0.5, out_dir=tmp_path, token=TOKEN,
                    max_request_bytes=4096, rate_limit=0, min_effect=0.1, salt="fixed")
    with router:
        url = router.url

        async def session(i: int, stream: bool):
            model = OpenAIModel(client_args={"base_url": url + "/v1", "api_key": TOKEN, "max_retries": 0,
                                             "default_headers": {"X-Agentboost-Session": f"s{i}"}},
                                model_id="agentboost", stream=stream)
            agent = Agent(model=model, tools=[add], system_prompt="Use the tools.", callback_handler=None)
            result = await agent.invoke_async("What is 2 + 3?")
            return str(result).strip()

        async def many():
            return await asyncio.gather(*(session(i, stream=i % 2 == 0) for i in range(40)))

        answers = asyncio.run(many())
        arms = {f"s{i}": router._session_arm[f"s{i}"] for i in range(40)}
        for i, a in enumerate(answers):  # each session answered by its own arm, tool round included
            assert a == ("It is 5." if arms[f"s{i}"] == "experiment" else "The answer is 5."), (i, a)
        assert sorted(draw("fixed", n) < 0.5 for n in range(40)) == sorted(a == "experiment" for a in arms.values())
        assert 19 <= sum(a == "experiment" for a in arms.values()) <= 21  # low discrepancy: 40 sessions split evenly
        # sticky: a session's next call stays on its arm even after the split moves
        status, _, body = post(url + "/v1/ab/split", {"split": 1.0})
        assert status == 200 and json.loads(body) == {"from": 0.5, "to": 1.0}
        stuck = next(s for s, a in arms.items() if a == "baseline")
        req = {"messages": [{"role": "user", "content": "hi"}], "user": None}
        status, headers, _ = post(url + "/v1/chat/completions", req, headers={"X-Agentboost-Session": stuck})
        assert status == 200 and headers["X-Agentboost-Arm"] == "baseline"
        status, headers, _ = post(url + "/v1/chat/completions", {**req, "user": "u-1"})
        assert status == 200 and headers["X-Agentboost-Arm"] == "experiment"  # new keys: the new split
        # feedback from the client: by session id, the last one counts
        for i in range(40):
            assert post(url + "/v1/feedback", {"session_id": f"s{i}", "success": False})[0] == 200
            assert post(url + "/v1/feedback", {"session_id": f"s{i}", "success": arms[f"s{i}"] == "experiment",
                                               "reward": 1.0 if arms[f"s{i}"] == "experiment" else 0.25})[0] == 200
        # the guards: each a status and a one-line reason
        assert post(url + "/v1/chat/completions", req, token=None)[0] == 401
        assert post(url + "/v1/chat/completions", req, token="wrong")[0] == 401
        assert post(url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "x" * 5000}]})[0] == 413
        assert post(url + "/v1/chat/completions", None, raw=b"{not json")[0] == 400
        assert post(url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "n": 2})[0] == 400
        assert post(url + "/v1/feedback", {"session_id": "nobody", "success": True})[0] == 404
        assert post(url + "/v1/feedback", {"session_id": "s1", "reward": "high"})[0] == 400
        assert post(url + "/v1/feedback", {"session_id": "s1", "task": {"answer": "5"}})[0] == 400  # no reward here
        assert post(url + "/v1/ab/split", {"split": 1.5})[0] == 400
        req = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            metrics = r.read().decode()
        n_exp = sum(a == "experiment" for a in arms.values())
        assert f'agentboost_serve_sessions_total{{arm="experiment"}} {n_exp + 1}.0' in metrics
        assert 'agentboost_serve_requests_total{arm="baseline",outcome="ok"}' in metrics
        assert f'agentboost_serve_successes_total{{arm="experiment"}} {float(n_exp)}' in metrics
        assert "agentboost_serve_experiment_split 1.0" in metrics
    events = [json.loads(line) for line in (tmp_path / "ab.jsonl").read_text().splitlines()]
    assert [e for e in events if e["event"] == "split"][0]["to"] == 1.0
    r = ab_report(tmp_path / "ab.jsonl")
    e, b = r["arms"]["experiment"], r["arms"]["baseline"]
    assert e["sessions"] == n_exp + 1 and b["sessions"] == 40 - n_exp
    assert e["calls"] == 2 * n_exp + 1 and e["errors"] == 0  # two calls per tool round, one after the split
    assert e["success_rate"] == 1.0 and b["success_rate"] == 0.0 and b["mean_reward"] == 0.25
    assert r["split"]["phases"][0]["split"] == 0.5 and r["split"]["phases"][1] == {
        "split": 1.0, "sessions": 1, "experiment": 1, "changed_at": r["split"]["phases"][1]["changed_at"], "observed": 1.0}
    d = r["success_difference"]
    assert d["mean_difference"] == 1.0 and d["p_value"] < 0.001 and d["significant"] and r["min_effect_reached"]
    text = report_text(r)
    assert "success difference (experiment - baseline) +1.000" in text and "minimum effect +0.100: reached" in text


def test_unpaired_comparison_and_guards():
    # 30/100 against 50/100: Fisher's exact two-sided p is 0.0057; the label permutation test agrees
    r = unpaired_comparison([1.0] * 30 + [0.0] * 70, [1.0] * 50 + [0.0] * 50)
    assert r.mean_difference == pytest.approx(-0.2) and 0.003 < r.p_value < 0.01 and r.significant
    assert r.ci95[0] == pytest.approx(-0.2 - 1.96 * (0.3 * 0.7 / 99 + 0.25 / 99) ** 0.5)
    assert unpaired_comparison([1.0, 1.0], [1.0, 1.0]).p_value == 1.0
    big = unpaired_comparison([1.0] * 12_000 + [0.0] * 13_000, [1.0] * 12_500 + [0.0] * 12_500)
    assert big.method.startswith("normal approximation") and 0.0 < big.p_value < 0.001
    with pytest.raises(ValueError, match="each arm needs at least one outcome"):
        unpaired_comparison([], [1.0])
    # the paired test it sits beside is unchanged: one sample per task is McNemar's exact test
    assert paired_comparison({"a": [1.0], "b": [1.0], "c": [0.0]}, {"a": [0.0], "b": [0.0], "c": [0.0]}).p_value == 0.5
    with pytest.raises(ServeInputError, match="not loopback: give --token"):
        check_bind("0.0.0.0", None)
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "t")
    with pytest.raises(ServeInputError, match="two arms named baseline and experiment"):
        Router({"a": None, "b": None})


def chat(url, session=None, user=None):
    req = {"messages": [{"role": "user", "content": "hi"}], **({"user": user} if user else {})}
    status, headers, _ = post(url + "/v1/chat/completions", req,
                              headers={"X-Agentboost-Session": session} if session else None)
    return status, headers.get("X-Agentboost-Arm")


def test_assignments_survive_a_restart_and_new_arms_are_a_new_test(tmp_path, smollm2_tok):
    def router(experiment="experiment", **options):
        return Router({"baseline": arm("baseline", smollm2_tok, "A"), "experiment": arm(experiment, smollm2_tok, "B")},
                      out_dir=tmp_path, token=TOKEN, **options)

    first = router(split=0.5)
    with first:
        arms = {f"s{i}": chat(first.url, f"s{i}")[1] for i in range(12)}
        user_arm = chat(first.url, "u-session", user="u-1")[1]
        first.set_split(0.8, by="test")
    assert set(arms.values()) == {"baseline", "experiment"}
    second = router()  # no split, no salt: the test goes on as it was left
    assert (second.salt, second.split) == (first.salt, 0.8)
    with second:
        assert {s: chat(second.url, s)[1] for s in arms} == arms  # every session on its arm
        assert chat(second.url, "another-session", user="u-1")[1] == user_arm  # and every user
        n = len(arms) + 1  # the draws go on where they stopped: 12 sessions and one user drew before
        assert chat(second.url, "new")[1] == ("experiment" if draw(first.salt, n) < 0.8 else "baseline")
    events = [json.loads(line) for line in (tmp_path / "ab.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["event"] in ("config", "restart")] == ["config", "restart"]
    assert [e for e in events if e["event"] == "restart"][0]["sessions"] == 13
    r = ab_report(tmp_path / "ab.jsonl")
    assert r["sessions"] == 15 and sum(a["sessions"] for a in r["arms"].values()) == 15  # no session counted twice
    assert [(p["split"], p["sessions"]) for p in r["split"]["phases"]] == [(0.5, 13), (0.8, 2)]
    # other arms are another test: nothing carried over, the report starts again
    with router(experiment="experiment-2", split=0.5) as third:
        assert third.salt != first.salt and not third._session_arm
        chat(third.url, "s0")
    r = ab_report(tmp_path / "ab.jsonl")
    assert r["sessions"] == 1 and r["arms"]["experiment"]["description"] == "scripted experiment-2"


def test_rate_limit_is_per_user_then_session_then_address(smollm2_tok):
    from agentboost.serving.router import RateLimiter

    with Router({"policy": arm("policy", smollm2_tok, "ok")}, token=TOKEN, rate_limit=0.01) as r:  # one call each
        assert chat(r.url, user="a")[0] == 200 and chat(r.url, user="a")[0] == 429
        assert chat(r.url, session="s-1", user="b")[0] == 200  # users of one address: a bucket each
        assert chat(r.url, session="s-1")[0] == 200 and chat(r.url, session="s-1")[0] == 429  # no user: the session's
        assert chat(r.url)[0] == 200 and chat(r.url)[0] == 429  # neither: the address's
        status, headers, body = post(r.url + "/v1/chat/completions", {"messages": [], "user": "c"})
        assert status == 400  # the body read for the key is the handler's too
    limiter = RateLimiter(1.0, burst=1, max_keys=2)
    assert limiter.allow("a") and not limiter.allow("a") and limiter.allow("b") and limiter.allow("c")
    assert list(limiter._buckets) == ["b", "c"] and limiter.allow("a")  # the least recently seen key was dropped


def test_arms_change_live_on_a_reconfigurable_router(tmp_path, smollm2_tok):
    loaded = []

    def loader(arms, current):  # as build_router's: a serving policy of the same spec is reused
        have = {p.spec: p for p in current.values()}
        for spec in arms.values():
            if spec not in have:
                have[spec] = arm(spec, smollm2_tok, f"I am {spec}.")
                loaded.append(spec)
        return {name: have[spec] for name, spec in arms.items()}

    with pytest.raises(ServeInputError, match="needs a bearer token"):
        Router({"policy": arm("v1", smollm2_tok, "I am v1.")}, loader=loader)
    from agentboost.run.prompt_policy import PromptPolicy

    prompt = PromptPolicy(system_prompt="You have a calculator.", instructions=["Check the tool's result."])
    with Router({"policy": arm("v1", smollm2_tok, "I am v1.")}, out_dir=tmp_path, token=TOKEN, loader=loader,
                prompt_policies={"policy": prompt}) as r:
        assert chat(r.url, "old") == (200, None)
        status, _, body = post(r.url + "/v1/admin/arms", {"arms": {"baseline": "v1", "experiment": "v2"}, "split": 1.0,
                                                          "by": "test"})
        assert status == 200 and json.loads(body)["changed"] == "arms" and loaded == ["v2"]
        assert r.prompt_policies == {}  # it was given for the arm "policy", which is no more
        status, headers, body = post(r.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]},
                                     headers={"X-Agentboost-Session": "new"})
        assert headers["X-Agentboost-Arm"] == "experiment" and "I am v2." in body
        status, _, body = post(r.url + "/v1/admin/arms", {"arms": {"baseline": "v1", "experiment": "v2"}, "split": 0.0})
        assert status == 200 and json.loads(body)["changed"] == "split" and loaded == ["v2"]
        assert chat(r.url, "newer")[1] == "baseline" and chat(r.url, "new")[1] == "experiment"
        for bad, reason in [({"arms": {"a": "x", "b": "y"}}, "baseline and experiment"), ({"arms": ["x"]}, "'arms' must"),
                            ({"arms": {"policy": "v1"}, "split": 3}, "split must be in")]:
            status, _, body = post(r.url + "/v1/admin/arms", bad)
            assert status == 400 and reason in body, body
    events = [json.loads(line) for line in (tmp_path / "ab.jsonl").read_text().splitlines()]
    assert [(e["event"], e.get("by")) for e in events if e["event"] in ("config", "split")] == [
        ("config", None), ("config", "test"), ("split", "127.0.0.1")]
    assert ab_report(tmp_path / "ab.jsonl")["sessions"] == 2  # the new test: "old" was the plain server's
    with Router({"policy": arm("v1", smollm2_tok, "x")}, token=TOKEN) as r:
        assert post(r.url + "/v1/admin/arms", {"arms": {"policy": "v2"}})[0] == 403


def test_malformed_bodies_and_rewards_that_are_no_numbers_get_400(tmp_path, smollm2_tok):
    # a 100,000-deep JSON body raised RecursionError (500); "stream": "yes" was taken as true; NaN,
    # 1e308 and 1e400 (infinity) were accepted as rewards and made `ab report` call a test significant
    router = Router({"baseline": arm("baseline", smollm2_tok, "It is 5.")}, out_dir=tmp_path, token=TOKEN,
                    max_request_bytes=1 << 20, rate_limit=0, salt="fixed")
    with router:
        url = router.url
        chat = {"messages": [{"role": "user", "content": "hi"}]}
        assert post(url + "/v1/chat/completions", chat, headers={"X-Agentboost-Session": "s1"})[0] == 200
        deep = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        for path in ("/v1/chat/completions", "/v1/feedback"):
            status, _, body = post(url + path, None, raw=deep)
            assert status == 400 and "nests too deeply" in body, (path, status, body)
        status, _, body = post(url + "/v1/chat/completions", {**chat, "stream": "yes"})
        assert status == 400 and "'stream' must be true or false" in body, body  # (the protocol's check)
        for raw in (b'{"session_id": "s1", "reward": NaN}', b'{"session_id": "s1", "reward": 1e400}'):
            status, _, body = post(url + "/v1/feedback", None, raw=raw)
            assert status == 400, (raw, status, body)
        status, _, body = post(url + "/v1/feedback", {"session_id": "s1", "reward": 1e308})
        assert status == 400 and "a finite number in [-1e+06, 1e+06]" in body, body
        assert post(url + "/v1/feedback", {"session_id": "s1", "reward": 0.5})[0] == 200
    # a log written before feedback refused them: the report leaves them out of every figure
    events = [{"event": "config", "arms": {"baseline": {}, "experiment": {}}, "split": 0.5}]
    for i in range(6):
        arm_name = "experiment" if i % 2 else "baseline"
        events += [{"event": "assign", "session": f"s{i}", "arm": arm_name},
                   {"event": "feedback", "session": f"s{i}", "arm": arm_name,
                    "reward": [float("nan"), 1e308, float("inf"), 0.5, "high", 0.25][i]}]
    r = ab_report(events)
    assert r["arms"]["experiment"]["mean_reward"] == 0.375 and r["arms"]["experiment"]["invalid_rewards"] == 1
    assert r["arms"]["baseline"]["mean_reward"] is None and r["arms"]["baseline"]["invalid_rewards"] == 3
    assert "reward_difference" not in r
    assert "baseline: 3 posted rewards left out of every figure" in report_text(r)
def test_a_restart_with_the_same_command_line_keeps_the_live_split(tmp_path, smollm2_tok):
    """`serve --ab ... --split 0.3`, then a live `ab split 0.5`, then the same command line again:
    the live 0.5 stays (the command line's 0.3 is the split the test started with). A split given
    on purpose at a restart (another value) replaces it, logged."""
    def router(**options):
        return Router({"baseline": arm("baseline", smollm2_tok, "A"), "experiment": arm("experiment", smollm2_tok, "B")},
                      out_dir=tmp_path, token=TOKEN, **options)

    with router(split=0.3) as first:
        chat(first.url, "s0")
        first.set_split(0.5, by="ab split")
    again = router(split=0.3)  # the same command line
    assert again.split == 0.5
    again.close()
    other = router(split=0.2)  # another split, on purpose
    assert other.split == 0.2
    other.close()
    events = [json.loads(line) for line in (tmp_path / "ab.jsonl").read_text().splitlines()]
    assert [(e["from"], e["to"], e["by"]) for e in events if e["event"] == "split"] == [
        (0.3, 0.5, "ab split"), (0.5, 0.2, "restart")]


@pytest.mark.parametrize("body", [{"stream": True, "stream_options": "yes"}, {"logprobs": "yes"},
                                  {"frobnicate": 1}])
def test_serve_refuses_a_malformed_or_unknown_field_in_one_line(smollm2_tok, body):
    base = arm("policy", smollm2_tok, "A")
    with Router({"policy": base}, token=TOKEN) as router:
        status, _, text = post(router.url + "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "hi"}], **body})
        assert status == 400 and "\n" not in json.loads(text)["error"]["message"], text
        status, _, text = post(router.url + "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "hi"}], "logprobs": True})
        lps = json.loads(text)["choices"][0]["logprobs"]["content"]
    assert status == 200 and lps and all(c["logprob"] == base.sampler.logprob for c in lps)
    assert base.sampler.calls == 1


def test_serve_speaks_responses_and_anthropic_messages(tmp_path, smollm2_tok):
    """The `openai` client's Responses API (the second turn only by previous_response_id: serve finds
    the session by it) and the `anthropic` SDK (x-api-key, streamed), each with a tool round, on a
    served A/B test: answers from the session's arm, assignments per user, in one log."""
    import anthropic
    import openai

    call = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    policies = {}
    for name, answer in (("baseline", "Base says 5."), ("experiment", "Exp says 5.")):
        policies[name] = arm(name, smollm2_tok, "")
        policies[name].sampler.script = (
            lambda ids, i, answer=answer: call if "tool_response" not in smollm2_tok.decode(ids[-40:]) else answer)
    router = Router(policies, split=0.5, out_dir=tmp_path, token=TOKEN, salt="fixed")
    with router:
        oa = openai.OpenAI(base_url=router.url + "/v1", api_key=TOKEN, max_retries=0)
        tools = [{"type": "function", "name": "add", "description": "Add.", "parameters": {
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}]
        first = oa.responses.create(model="agentboost", input="What is 2 + 3?", tools=tools, user="r-user")
        fc = first.output[-1]
        assert fc.type == "function_call" and fc.name == "add" and fc.arguments == '{"a": 2, "b": 3}'
        second = oa.responses.create(model="agentboost", previous_response_id=first.id, tools=tools,
                                     input=[{"type": "function_call_output", "call_id": fc.call_id, "output": "5"}])
        r_arm = router._session_arm[next(iter(router._session_arm))]
        assert second.output_text == ("Exp says 5." if r_arm == "experiment" else "Base says 5.")
        assert len(router._session_arm) == 1  # one session, found by previous_response_id
        held = router._sessions[next(iter(router._sessions))]
        assert len(held.lineages) == 1 and len(held.lineages[0].model.calls) == 2 and held.lineages[0].model.rerenders == 0

        an = anthropic.Anthropic(base_url=router.url, api_key=TOKEN, max_retries=0,
                                 default_headers={"X-Agentboost-Session": "a-1"})
        atools = [{"name": "add", "description": "Add.", "input_schema": tools[0]["parameters"]}]
        msgs = [{"role": "user", "content": "What is 2 + 3?"}]
        with an.messages.stream(model="agentboost", max_tokens=64, messages=msgs, tools=atools,
                                metadata={"user_id": "a-user"}) as stream:
            reply = stream.get_final_message()
        use = reply.content[-1]
        assert reply.stop_reason == "tool_use" and use.name == "add" and use.input == {"a": 2, "b": 3}
        msgs += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "5"}]}]
        done = an.messages.create(model="agentboost", max_tokens=64, messages=msgs, tools=atools,
                                  metadata={"user_id": "a-user"})
        a_arm = router._session_arm["a-1"]
        assert done.content[0].text == ("Exp says 5." if a_arm == "experiment" else "Base says 5.")
        assert router._sessions["a-1"].lineages[0].model.rerenders == 0
        # errors in the caller's protocol: Anthropic's error shape, a 401 for a wrong key
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(base_url=router.url, api_key="wrong", max_retries=0).messages.create(
                model="agentboost", max_tokens=8, messages=msgs[:1])
    events = [json.loads(line) for line in (tmp_path / "ab.jsonl").read_text().splitlines()]
    assert [(e["user"], e["arm"]) for e in events if e["event"] == "assign"] == [("r-user", r_arm), ("a-user", a_arm)]
    assert [e["api"] for e in events if e["event"] == "call"] == ["responses", "responses", "messages", "messages"]


def test_answers_and_models_carry_the_served_weights_fingerprint(tmp_path, smollm2_tok):
    """What ``load_served_policy`` verified (run/verify.py verify_served) is what every answer names:
    OpenAI's system_fingerprint in chat completions (every chunk streamed), a header in every protocol."""
    base, exp = arm("baseline", smollm2_tok, "five"), arm("experiment", smollm2_tok, "5")
    base.identity = {"version": 0, "digest": "00aa11bb22cc33dd", "checkpoint_step": None, "run_verified": False}
    exp.identity = {"version": 1, "digest": "0123456789abcdef", "checkpoint_step": 12, "run_verified": True}
    assert exp.system_fingerprint == "agentboost-step12-0123456789abcdef"
    with Router({"experiment": exp}, out_dir=tmp_path / "one", token=TOKEN) as router:
        with urllib.request.urlopen(urllib.request.Request(router.url + "/v1/models",
                                                           headers={"Authorization": f"Bearer {TOKEN}"})) as r:
            assert json.loads(r.read())["data"][0]["system_fingerprint"] == exp.system_fingerprint
        msg = {"messages": [{"role": "user", "content": "2+3?"}]}
        status, headers, body = post(router.url + "/v1/chat/completions", msg)
        assert status == 200 and json.loads(body)["system_fingerprint"] == exp.system_fingerprint
        assert headers["X-Agentboost-Weights"] == exp.system_fingerprint
        status, _, body = post(router.url + "/v1/chat/completions", {**msg, "stream": True})
        chunks = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]
        assert chunks and all(c["system_fingerprint"] == exp.system_fingerprint for c in chunks)
        status, headers, _ = post(router.url + "/v1/messages", {"model": "agentboost", "max_tokens": 16, **msg},
                                  headers={"anthropic-version": "2023-06-01"})
        assert status == 200 and headers["X-Agentboost-Weights"] == exp.system_fingerprint
    with Router({"baseline": base, "experiment": exp}, split=0.5, out_dir=tmp_path / "ab", token=TOKEN) as router:
        with urllib.request.urlopen(urllib.request.Request(router.url + "/v1/models",
                                                           headers={"Authorization": f"Bearer {TOKEN}"})) as r:
            assert json.loads(r.read())["data"][0]["system_fingerprints"] == {
                "baseline": "agentboost-v0-00aa11bb22cc33dd", "experiment": exp.system_fingerprint}

"""``agentboost jobs serve``: the local job service (HTTP on loopback), on aiohttp — already
agentboost's HTTP library (the policy server), asynchronous, so a long evaluation does not block
status requests, with request-size limits built in.

Every endpoint needs ``Authorization: Bearer <token>`` (the token file in the jobs root, owner-only).

What the token grants: starting, cancelling, evaluating and exporting jobs, and reading every job's
status, events and metrics. A job runs as the service's user and imports what its configuration
names (rewards, tools, agent factories, conversations: any module installed for the service's
Python, with that user's rights), so give the token only to whom you would let run code as that
user. It does not let a caller read files of its choosing: task data comes in the request (the
data file keys cannot be overridden), names are checked to be plain file names, and webhooks do
not reach loopback or private addresses unless the service is started with
``--allow-private-webhooks``. At most ``--max-running`` jobs (default 2) run at once; the rest wait
in state ``queued``, oldest first. Every input error is a 4xx with a one-line reason.

    POST /jobs                    {"name", "config": GRPOConfig fields, "training_data", "evaluation_data"?, "reward"?,
                                   "agent"?: agent keys (tools, factory, system_prompt, max_model_calls, ...),
                                   "metadata"?: any object}
    GET  /jobs                    all jobs' status
    GET  /jobs/{id}               one job's status (state, step, loss, validation accuracy, budget used)
    POST /jobs/{id}/cancel        clean stop: the step finishes, a checkpoint is written
    POST /jobs/{id}/evaluate      {"samples"?, "baseline"?}: the newest checkpoint vs the base model
    POST /jobs/{id}/export        {"name", "success_only"?, "min_reward"?, "limit"?}: into the job's exports/
    GET  /jobs/{id}/events        the job's events as server-sent events, until it ends (``?from=SEQ``)
    GET  /training/ws/{id}        the same events over a WebSocket (the GRPO guide's live updates: ``type``
                                  progress with iteration/total/loss, checkpoint with checkpoint_id, ...)
    POST /webhooks                {"url", "events"?, "secret"?}: deliveries of job events (see jobs/events.py)
    GET  /webhooks, DELETE /webhooks/{id}
    GET  /metrics                 Prometheus metrics of every job (run/prometheus.py)
    POST /deployments             {"agent_id", "checkpoint_id", "environment"?, "engine"?}: serve a checkpoint
                                  (the guide's deploy_checkpoint; jobs/deployments.py)
    POST /deployments/ab          {"agent_id"?, "baseline_checkpoint"?, "experiment_checkpoint"?, "traffic_split"?,
                                   "environment"?, "engine"?}: an A/B test there, or its new split (configure_ab_test)
    GET  /deployments             every deployment: state, base URL, arms, split
    GET  /deployments/{agent_id}/{environment}     one, with its A/B report
    DELETE /deployments/{agent_id}/{environment}   stop it
    POST /loops                   {"loop_id", "config"?: dotted keys, "gate_data": held-out task rows, "production"?}:
                                  a continual loop (jobs/loops.py, docs/continual.md); an id that has one resumes it
    GET  /loops                   every loop: state, base URL, production version, sessions, cost
    GET  /loops/{loop_id}         one, with every version's lineage, gate, live test and cost
    POST /loops/{loop_id}/propose {"checkpoint_id"? | "noise"?, "skip_gate"?}: a candidate (or a rollback drill)
    POST /loops/{loop_id}/stop    stop it (everything saved; POST /loops with its id resumes it)

Deployments are served by processes the service owns, at their own loopback ports, with the same
bearer token; they stop with the service. A job's status lists the running ones that serve its
checkpoints (``deployments``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
from typing import Any

from aiohttp import web

from ..errors import InputError
from ..run.prometheus import RunRef, registry_for
from .deployments import Deployments
from .events import TERMINAL, UnknownSubscription, Webhooks, job_events
from .loops import Loops
from .store import JobStore, UnknownJob

MAX_REQUEST_BYTES = 8 * 1024 * 1024
BODY_TIMEOUT_S = 30.0
DELIVERIES = web.AppKey("deliveries", asyncio.Task)
QUEUE = web.AppKey("queue", asyncio.Task)


def make_app(store: JobStore, allow_private_webhooks: bool = False,
             body_timeout_s: float | None = None) -> web.Application:
    """The service over ``store``. ``allow_private_webhooks``: deliver to loopback, private and
    link-local addresses too (refused by default: a token holder could otherwise make the service
    post to what only this machine can reach). ``body_timeout_s``: a request whose body has not
    arrived by then is answered 408 (None: ``BODY_TIMEOUT_S``)."""
    body_timeout_s = BODY_TIMEOUT_S if body_timeout_s is None else body_timeout_s
    token = store.token()

    @web.middleware
    async def auth(request: web.Request, handler):
        # compared as bytes: a header of any characters is just a wrong token, never an error
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, f"Bearer {token}".encode()):
            return web.json_response({"error": "missing or wrong bearer token"}, status=401)
        try:
            return await handler(request)
        except (UnknownJob, UnknownSubscription) as e:
            return web.json_response({"error": str(e)}, status=404)
        except InputError as e:
            return web.json_response({"error": str(e)}, status=400)

    async def body(request: web.Request) -> dict[str, Any]:
        try:  # a client that trickles its body must not hold a request (and its memory) forever
            raw = await asyncio.wait_for(request.read(), body_timeout_s)
        except asyncio.TimeoutError:
            raise web.HTTPRequestTimeout(
                text=json.dumps({"error": f"the request body did not arrive within {body_timeout_s:g} s"}),
                content_type="application/json") from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise InputError("the request body is not UTF-8 text") from None
        except json.JSONDecodeError as e:
            raise InputError(f"the request body is not JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
        except RecursionError:
            raise InputError("the request body nests too deeply") from None
        if not isinstance(data, dict):
            raise InputError("the request body must be a JSON object")
        return data

    def blocking(fn, *args, **kwargs):
        return asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))

    async def start(request: web.Request) -> web.Response:
        b = await body(request)
        config = b.get("config") or {}
        if not isinstance(config, dict):
            raise InputError(f"config must be an object of GRPOConfig fields, got {type(config).__name__}")
        for key in ("training_data", "evaluation_data"):  # rows in the request, never a path on this machine
            if b.get(key) is not None and not isinstance(b[key], list):
                raise InputError(f"{key} must be a list of task rows, got {type(b[key]).__name__}")
        job_id = await blocking(store.start, b.get("name"), config, b.get("training_data") or [],
                                b.get("evaluation_data"), b.get("reward"), b.get("agent"), b.get("metadata"))
        return web.json_response({"job_id": job_id, **await blocking(job_status, job_id)}, status=201)

    deployments = Deployments(store)

    def job_status(job_id: str) -> dict[str, Any]:
        return {**store.status(job_id), "deployments": deployments.of_job(job_id)}

    def jobs_with_deployments() -> list[dict[str, Any]]:
        every = deployments.list()
        return [{**j, "deployments": deployments.of_job(j["job_id"], every)} for j in store.list()]

    async def list_jobs(request: web.Request) -> web.Response:
        return web.json_response({"jobs": await blocking(jobs_with_deployments)})

    async def status(request: web.Request) -> web.Response:
        return web.json_response(await blocking(job_status, request.match_info["job_id"]))

    async def deploy(request: web.Request) -> web.Response:
        b = await body(request)
        return web.json_response(await blocking(deployments.deploy, b.get("agent_id"), b.get("checkpoint_id"),
                                                b.get("environment", "production"), b.get("engine")))

    async def configure_ab(request: web.Request) -> web.Response:
        b = await body(request)
        return web.json_response(await blocking(
            deployments.configure_ab, b.get("agent_id"), b.get("baseline_checkpoint"), b.get("experiment_checkpoint"),
            b.get("traffic_split", 0.1), b.get("environment", "production"), b.get("engine")))

    async def list_deployments(request: web.Request) -> web.Response:
        return web.json_response({"deployments": await blocking(deployments.list)})

    async def deployment(request: web.Request) -> web.Response:
        m = request.match_info
        return web.json_response(await blocking(deployments.status, m["agent_id"], m["environment"], report=True))

    async def stop_deployment(request: web.Request) -> web.Response:
        m = request.match_info
        return web.json_response(await blocking(deployments.stop, m["agent_id"], m["environment"]))

    loops = Loops(deployments)

    async def start_loop(request: web.Request) -> web.Response:
        b = await body(request)
        return web.json_response(await blocking(loops.start, b.get("loop_id"), b.get("config"), b.get("gate_data"),
                                                b.get("production")), status=201)

    async def list_loops(request: web.Request) -> web.Response:
        return web.json_response({"loops": await blocking(loops.list)})

    async def loop_status(request: web.Request) -> web.Response:
        return web.json_response(await blocking(loops.status, request.match_info["loop_id"]))

    async def propose(request: web.Request) -> web.Response:
        b = await body(request)
        return web.json_response(await blocking(loops.propose, request.match_info["loop_id"], b.get("checkpoint_id"),
                                                b.get("noise"), b.get("skip_gate", False)), status=201)

    async def stop_loop(request: web.Request) -> web.Response:
        return web.json_response(await blocking(loops.stop, request.match_info["loop_id"]))

    async def cancel(request: web.Request) -> web.Response:
        return web.json_response(await blocking(store.cancel, request.match_info["job_id"]))

    async def evaluate(request: web.Request) -> web.Response:
        b = await body(request)
        return web.json_response(await blocking(store.evaluate, request.match_info["job_id"], b.get("samples"),
                                                b.get("baseline")))

    async def export(request: web.Request) -> web.Response:
        b = await body(request)
        return web.json_response(await blocking(store.export, request.match_info["job_id"], b.get("name"),
                                                b.get("success_only", False), b.get("min_reward"), b.get("limit")))

    hooks = Webhooks(store, allow_private=allow_private_webhooks)

    async def subscribe(request: web.Request) -> web.Response:
        b = await body(request)
        return web.json_response(await blocking(hooks.subscribe, b.get("url"), b.get("events"), b.get("secret")),
                                 status=201)

    async def list_hooks(request: web.Request) -> web.Response:
        return web.json_response({"webhooks": hooks.list()})

    async def unsubscribe(request: web.Request) -> web.Response:
        await blocking(hooks.unsubscribe, request.match_info["sub_id"])
        return web.json_response({"deleted": request.match_info["sub_id"]})

    async def events_from(request: web.Request) -> tuple[str, int]:
        job_id = request.match_info["job_id"]
        await blocking(store.status, job_id)  # 404 for an unknown job, before the stream starts
        try:
            seq = int(request.query.get("from", "0"))
        except ValueError:
            raise InputError("from must be an event number") from None
        if seq < 0:
            raise InputError("from must be an event number >= 0")
        return job_id, seq

    async def live(request: web.Request) -> web.WebSocketResponse:
        """The job's events over a WebSocket (aiohttp's own), one JSON text message each, from
        ``?from=SEQ``; closed by the service after the job's last event (completed, cancelled, failed)."""
        job_id, seq = await events_from(request)
        ws = web.WebSocketResponse()
        await ws.prepare(request)

        async def drain() -> None:  # reads the client's frames, so a close from its side is seen
            async for _ in ws:
                pass

        reader = asyncio.get_running_loop().create_task(drain())
        try:
            while not ws.closed and not reader.done():
                events = await blocking(job_events, store, job_id)
                for e in events[seq:]:
                    await ws.send_json(e)
                    seq = e["seq"] + 1
                    if e["event"] in TERMINAL:
                        await ws.close()
                        return ws
                await asyncio.sleep(0.5)
        except ConnectionResetError:
            pass  # the client went away mid-send
        finally:
            reader.cancel()
        return ws

    async def stream(request: web.Request) -> web.StreamResponse:
        job_id, seq = await events_from(request)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        while True:
            events = await blocking(job_events, store, job_id)
            for e in events[seq:]:
                await resp.write(f"id: {e['seq']}\nevent: {e['event']}\ndata: {json.dumps(e)}\n\n".encode())
                seq = e["seq"] + 1
                if e["event"] in TERMINAL:
                    return resp
            await asyncio.sleep(0.5)

    registry = registry_for(lambda: [RunRef(j["job_id"], store.root / j["job_id"] / "run", j["state"])
                                     for j in store.list()])

    async def metrics(request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        data = await blocking(generate_latest, registry)
        return web.Response(body=data, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start_queued() -> None:
        while True:  # queued jobs start as running ones end
            try:
                await blocking(store.start_queued)
            except Exception as e:  # said, retried: the service keeps serving
                print(f"agentboost jobs: starting queued jobs failed: {type(e).__name__}: {e}", flush=True)
            await asyncio.sleep(1.0)

    async def start_deliveries(app: web.Application) -> None:
        # a deployment a service before this one left running (it died) is no longer owned: stopped
        await blocking(deployments.stop_all, "a new job service started")
        await blocking(loops.stop_all, "a new job service started")
        # a job the machine's going down interrupted goes on from its last checkpoint
        for job_id in await blocking(store.recover):
            print(f"agentboost jobs: {job_id} was interrupted (its process ended without a word): resumed", flush=True)
        app[DELIVERIES] = asyncio.get_running_loop().create_task(hooks.run())
        app[QUEUE] = asyncio.get_running_loop().create_task(start_queued())

    async def stop_deliveries(app: web.Application) -> None:
        app[DELIVERIES].cancel()
        app[QUEUE].cancel()
        await blocking(deployments.stop_all)  # deployments stop with the service
        await blocking(loops.stop_all)  # and its loops (each resumes when started again)

    app = web.Application(middlewares=[auth], client_max_size=MAX_REQUEST_BYTES)
    app.on_startup.append(start_deliveries)
    app.on_cleanup.append(stop_deliveries)
    app.router.add_post("/webhooks", subscribe)
    app.router.add_get("/webhooks", list_hooks)
    app.router.add_delete("/webhooks/{sub_id}", unsubscribe)
    app.router.add_get("/jobs/{job_id}/events", stream)
    app.router.add_get("/training/ws/{job_id}", live)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/jobs", start)
    app.router.add_get("/jobs", list_jobs)
    app.router.add_get("/jobs/{job_id}", status)
    app.router.add_post("/jobs/{job_id}/cancel", cancel)
    app.router.add_post("/jobs/{job_id}/evaluate", evaluate)
    app.router.add_post("/jobs/{job_id}/export", export)
    app.router.add_post("/deployments", deploy)
    app.router.add_post("/deployments/ab", configure_ab)
    app.router.add_get("/deployments", list_deployments)
    app.router.add_get("/deployments/{agent_id}/{environment}", deployment)
    app.router.add_delete("/deployments/{agent_id}/{environment}", stop_deployment)
    app.router.add_post("/loops", start_loop)
    app.router.add_get("/loops", list_loops)
    app.router.add_get("/loops/{loop_id}", loop_status)
    app.router.add_post("/loops/{loop_id}/propose", propose)
    app.router.add_post("/loops/{loop_id}/stop", stop_loop)
    return app


def serve(root: str, host: str = "127.0.0.1", port: int = 8765, max_running: int = 2,
          allow_private_webhooks: bool = False) -> None:
    store = JobStore(root, max_running=max_running)
    store.token()
    print(f"agentboost jobs: serving {root} at http://{host}:{port} (token in {store.root / 'token'}; "
          f"at most {max_running} jobs run at once, the rest queue)", flush=True)
    web.run_app(make_app(store, allow_private_webhooks), host=host, port=port, print=None)

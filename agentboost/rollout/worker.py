"""The worker process: runs several episodes at once on its event loop.

Started by ``StrandsProcessPool`` with the spawn method. It leads its own process group, so the
pool can kill it together with anything its tools started. It talks to the pool over one pipe:

    pool -> worker: ("run", key, task, group_id, episode_id, sample, version, seed) | ("stop",)
                    (version: the weight version the episode samples from start to end, or None)
    worker -> pool: ("ready", pid) | ("fatal", message) | ("started", key) | ("done", key, episode_dict)

If the pool goes away (the pipe closes), the worker kills its process group and exits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import threading
import traceback
from typing import Any


def _kill_own_group() -> None:
    try:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    finally:
        os._exit(1)


def worker_main(conn, agent_spec, env, sampler_spec, slots: int) -> None:
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the pool's to handle
    try:
        from .sampler_factory import SamplerFactory

        factory = SamplerFactory(sampler_spec)
        agent_spec.validate()
        if env is not None:
            env.validate()
    except Exception as e:
        conn.send(("fatal", f"worker setup failed: {type(e).__name__}: {e}"))
        conn.close()
        os._exit(3)
    conn.send(("ready", os.getpid()))
    asyncio.run(_serve(conn, agent_spec, env, factory, slots))
    # Tool threads that never returned (a hung tool after a soft timeout) must not keep the
    # process alive, and neither may anything the tools started.
    _kill_own_group()


async def _serve(conn, agent_spec, env, factory, slots: int) -> None:
    from ..episodes.record import Episode, Status
    from .episode_runner import run_chat_episode, run_episode

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue = asyncio.Queue()
    send_lock = threading.Lock()

    def send(msg: Any) -> None:
        with send_lock:
            conn.send(msg)

    def reader() -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                _kill_own_group()  # the pool is gone
                return
            loop.call_soon_threadsafe(inbox.put_nowait, msg)
            if msg[0] == "stop":
                return

    threading.Thread(target=reader, name="agentboost-worker-reader", daemon=True).start()
    sem = asyncio.Semaphore(slots)
    running: set[asyncio.Task] = set()

    async def one(key, task, group_id, episode_id, sample, version, seed):
        async with sem:
            send(("started", key))
            try:
                if factory.chat is not None:  # a chat model we do not train: text-level
                    ep = await run_chat_episode(agent_spec, task, factory.chat, factory.spec.sampling, env=env,
                                                group_id=group_id, episode_id=episode_id, sample=sample)
                else:
                    # a job's own seed (a training step's): the requests of each (task, sample, call) derive from it
                    sampling = factory.spec.sampling if seed is None else dataclasses.replace(factory.spec.sampling,
                                                                                               seed=seed)
                    ep = await run_episode(agent_spec, task, factory.sampler_for_episode(version), factory.renderer,
                                           sampling, env=env, group_id=group_id, episode_id=episode_id,
                                           always_extend=agent_spec.always_extend, sample=sample)
            except Exception as e:  # a bug of ours; still one record for the task
                ep = Episode(episode_id=episode_id, task_id=str(task.get("task_id")), group_id=group_id,
                             status=Status.ERROR,
                             error=f"worker: {type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}")
            ep.metadata["worker_pid"] = os.getpid()
            if version is not None:  # the episode's provenance: every call sampled this version
                ep.metadata["weight_version"] = version
            send(("done", key, ep.to_dict()))

    while True:
        msg = await inbox.get()
        if msg[0] == "stop":
            break
        _, key, task, group_id, episode_id, sample, version, seed = msg
        t = asyncio.create_task(one(key, task, group_id, episode_id, sample, version, seed))
        running.add(t)
        t.add_done_callback(running.discard)
    if running:
        await asyncio.gather(*running, return_exceptions=True)
    await factory.close()

"""``collect``: every finished episode is handed over before the caller goes on, and an interrupt
keeps the ones that finished. (Done-callbacks did not: a future's waiters wake before its callbacks
run, so ``eval`` could close its episode file before the last episode was written.)"""

import threading
import time
from concurrent.futures import Future

import pytest

from agentboost.rollout.pool import collect


def _finish_later(futures, values, delay=0.01):
    def run():
        for f, v in zip(futures, values):
            time.sleep(delay)
            f.set_result(v)
    t = threading.Thread(target=run)
    t.start()
    return t


def test_every_episode_is_handed_over_before_collect_returns():
    futures = [Future() for _ in range(5)]
    handed = []

    def slow_writer(ep):  # a write that takes time, as an episode file's append under load
        time.sleep(0.05)
        handed.append(ep)

    t = _finish_later(futures, range(5))
    assert collect(futures, slow_writer) == list(range(5))
    assert sorted(handed) == list(range(5))  # all of them, before collect returned
    t.join()


def test_an_interrupt_hands_over_what_finished_then_goes_on():
    futures = [Future() for _ in range(4)]
    futures[0].set_result("a")
    futures[2].set_result("c")
    handed = []

    def writer(ep):
        handed.append(ep)
        if ep in ("a", "c") and len(handed) == 1:
            raise KeyboardInterrupt  # Ctrl-C while the first episode is being written

    with pytest.raises(KeyboardInterrupt):
        collect(futures, writer)
    assert sorted(handed) == ["a", "c"]  # the other finished one is kept too; the unfinished are not waited for

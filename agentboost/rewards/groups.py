"""GRPO groups: a failed member keeps its place (with the failed reward) or, by policy, the whole
group is dropped. Both are counted, never silent. This is the one place where failed episodes
are given their reward: workers and the pool only run and move episodes.

An ``incomplete`` episode (its client went away mid-call) is never trained on, whatever the policy:
it leaves its group, counted. An ``aborted`` member (the serving side was down:
``Status.ABORTED``) is not a failure of the policy: it gets no reward at all and leaves its group,
whose other members are compared among themselves (the group is then uneven, and counted so); a
group with no member left is gone."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum

from ..episodes.record import NEVER_TRAINED, Episode, Status


class GroupPolicy(str, Enum):
    KEEP = "keep"  # failed members stay, with the failed reward
    DROP = "drop"  # a group with a failed member is left out of training

    def __str__(self) -> str:
        return self.value


GROUP_POLICIES = tuple(p.value for p in GroupPolicy)


@dataclass
class GroupReport:
    groups: int = 0
    episodes: int = 0
    failed_episodes: int = 0
    aborted_episodes: int = 0  # left out of their groups: an outage is never a wrong answer
    groups_with_failures: int = 0
    dropped_groups: int = 0
    dropped_episodes: int = 0
    uneven_groups: int = 0  # groups whose size differs from the expected size
    incomplete_episodes: int = 0  # left out of training whatever the policy (Status.INCOMPLETE)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def group_episodes(episodes: list[Episode]) -> "OrderedDict[str, list[Episode]]":
    groups: OrderedDict[str, list[Episode]] = OrderedDict()
    for ep in episodes:
        groups.setdefault(ep.group_id, []).append(ep)
    return groups


def give_failed_reward(ep: Episode, failed_reward: float) -> None:
    ep.reward = failed_reward
    ep.reward_components = {"failed": failed_reward}
    ep.reward_metadata = {}


def apply_group_policy(episodes: list[Episode], policy: GroupPolicy | str = GroupPolicy.KEEP,
                       group_size: int | None = None, failed_reward: float = 0.0) -> tuple[list[Episode], GroupReport]:
    """Every failed episode gets ``failed_reward`` (also those of dropped groups, so that records
    written afterwards say what a failure was worth); with ``drop``, groups that have one are
    left out of the returned list. Aborted episodes are left out, unscored; incomplete ones are
    never in the returned list (their group goes on without them). All are counted in the report."""
    try:
        policy = GroupPolicy(policy)
    except ValueError:
        raise ValueError(f"group policy must be one of {GROUP_POLICIES}, got {policy!r}") from None
    report = GroupReport()
    kept: list[Episode] = []
    for members in group_episodes(episodes).values():
        report.groups += 1
        report.episodes += len(members)
        aborted = [ep for ep in members if ep.aborted]
        if aborted:
            for ep in aborted:  # no reward: a record that says 0 would read as a wrong answer
                ep.reward, ep.reward_components = None, {}
            report.aborted_episodes += len(aborted)
            members = [ep for ep in members if not ep.aborted]
            if not members:
                continue
        failed = 0
        for ep in members:
            if ep.failed:
                give_failed_reward(ep, failed_reward)
                # an incomplete one is not the policy's failure: it leaves, its group stays
                failed += Status(ep.status) not in NEVER_TRAINED
        report.failed_episodes += failed
        if group_size is not None and len(members) != group_size:
            report.uneven_groups += 1
        if failed:
            report.groups_with_failures += 1
            if policy is GroupPolicy.DROP:
                report.dropped_groups += 1
                report.dropped_episodes += len(members)
                continue
        for ep in members:
            if Status(ep.status) in NEVER_TRAINED:
                report.incomplete_episodes += 1
            else:
                kept.append(ep)
    return kept, report

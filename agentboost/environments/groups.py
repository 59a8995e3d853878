"""GRPO groups: a failed member keeps its place (with the env's failed reward) or, by policy, the
whole group is dropped. Both are counted, never silent."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..episodes.record import Episode

FAILED = ("timeout", "crashed", "error")
GROUP_POLICIES = ("keep", "drop")


@dataclass
class GroupReport:
    groups: int = 0
    episodes: int = 0
    failed_episodes: int = 0
    groups_with_failures: int = 0
    dropped_groups: int = 0
    dropped_episodes: int = 0
    uneven_groups: int = 0  # groups whose size differs from the expected size

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def group_episodes(episodes: list[Episode]) -> "OrderedDict[str, list[Episode]]":
    groups: OrderedDict[str, list[Episode]] = OrderedDict()
    for ep in episodes:
        groups.setdefault(ep.group_id, []).append(ep)
    return groups


def apply_group_policy(episodes: list[Episode], policy: str = "keep",
                       group_size: int | None = None) -> tuple[list[Episode], GroupReport]:
    if policy not in GROUP_POLICIES:
        raise ValueError(f"group policy must be one of {GROUP_POLICIES}, got {policy!r}")
    report = GroupReport()
    kept: list[Episode] = []
    for members in group_episodes(episodes).values():
        report.groups += 1
        report.episodes += len(members)
        failed = sum(1 for ep in members if ep.status in FAILED)
        report.failed_episodes += failed
        if group_size is not None and len(members) != group_size:
            report.uneven_groups += 1
        if failed:
            report.groups_with_failures += 1
            if policy == "drop":
                report.dropped_groups += 1
                report.dropped_episodes += len(members)
                continue
        kept.extend(members)
    return kept, report

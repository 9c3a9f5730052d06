"""Checks of an OTF2 archive that `otf2-print --silent` does not make: enter/leave nesting, per-location time
order, matched send/receive (same communicator, tag, length; ranks that name each other's locations)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import otf2
from otf2.events import Enter, Leave, Metric, MpiRecv, MpiSend


@dataclass
class Otf2Summary:
    enters: dict[str, int] = field(default_factory=dict)  # location name -> enters
    messages: list[tuple[str, str, str, int, int]] = field(default_factory=list)  # src, dst, comm, tag, bytes
    regions: set[str] = field(default_factory=set)
    metrics: list[tuple[str, str, float]] = field(default_factory=list)  # location, metric member, value


def check_archive(anchor: str) -> Otf2Summary:
    summary = Otf2Summary()
    stacks: dict[str, list[str]] = defaultdict(list)
    last_time: dict[str, int] = {}
    sends: dict[tuple[str, int, int], tuple[str, str, int]] = {}
    recvs: dict[tuple[str, int, int], tuple[str, str, int]] = {}
    with otf2.reader.open(anchor) as trace:
        for location, event in trace.events:
            loc = location.name
            assert event.time >= last_time.get(loc, 0), f"{loc}: time goes backwards at {event}"
            last_time[loc] = event.time
            if isinstance(event, Enter):
                stacks[loc].append(event.region.name)
                summary.enters[loc] = summary.enters.get(loc, 0) + 1
                summary.regions.add(event.region.name)
            elif isinstance(event, Leave):
                assert stacks[loc], f"{loc}: leave {event.region.name} with nothing entered"
                top = stacks[loc].pop()
                assert top == event.region.name, f"{loc}: leave {event.region.name} closes {top}"
            elif isinstance(event, MpiSend):
                receiver = event.communicator.group.members[event.receiver].name
                key = (event.communicator.name, event.msg_tag, event.msg_length)
                assert key not in sends, f"message {key} sent twice"
                sends[key] = (loc, receiver, event.time)
            elif isinstance(event, Metric):
                for member, value in zip(event.metric.members, event.values, strict=True):
                    assert value >= 0, f"{loc}: negative {member.name}"
                    summary.metrics.append((loc, member.name, value))
            elif isinstance(event, MpiRecv):
                sender = event.communicator.group.members[event.sender].name
                recvs[(event.communicator.name, event.msg_tag, event.msg_length)] = (sender, loc, event.time)
    for loc, stack in stacks.items():
        assert not stack, f"{loc}: regions left open at the end: {stack}"
    assert sends.keys() == recvs.keys(), f"unmatched messages: {sends.keys() ^ recvs.keys()}"
    for key, (src, dst, t_send) in sends.items():
        r_src, r_dst, t_recv = recvs[key]
        assert (src, dst) == (r_src, r_dst), f"message {key}: sent {src}->{dst}, received {r_src}->{r_dst}"
        assert t_recv >= t_send
        summary.messages.append((src, dst, key[0], key[1], key[2]))
    return summary

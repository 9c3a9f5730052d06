"""The `monitor` verb's options, its input error and the interval parser, without numpy or pyarrow.

`tailscope --help` builds every verb's parser; the monitor itself (counters/monitor.py: reading tsmon's
file, storing samples, the verb `cmd_monitor` that cli.py calls) is imported only when the verb runs.
monitor.py imports this module, never the other way round.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tailscope.errors import InputError


class MonitorInputError(InputError, ValueError):
    """A monitor file that cannot be read, or monitor options that cannot be used (exit 2)."""


def parse_interval(text: str) -> float:
    """'1s', '100ms', '10ms', '500us', '2' -> seconds."""
    units = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
    t = text.strip()
    for suffix in ("ms", "us", "s"):
        if t.endswith(suffix):
            number, mult = t[: -len(suffix)], units[suffix]
            break
    else:
        number, mult = t, 1.0
    try:
        seconds = float(number) * mult
    except ValueError:
        raise MonitorInputError(f"--interval {text}: expected a time like 1s, 100ms or 10ms") from None
    if seconds < 1e-3:
        raise MonitorInputError(f"--interval {text}: the shortest interval is 1ms")
    return seconds


def add_monitor_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = sub.add_parser("monitor", help="sample counters in the background (pinned, streaming to disk)")
    p.add_argument("--interval", default="1s", help="sampling interval: 1s (default), 100ms, 10ms")
    p.add_argument("--cpu", type=int, metavar="N", help="pin the monitor to CPU N (default: the last one)")
    p.add_argument("--events", metavar="SET", help="event set name or file (default: software events)")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="monitor file (JSON lines)")
    p.add_argument("--campaign", type=Path, metavar="DIR", help="store the samples in this campaign")
    p.add_argument("--node", help="node name for the samples (default: the host name)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="monitor while it runs")
    return p

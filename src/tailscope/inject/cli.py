"""`tailscope inject KIND` and `tailscope validate`: the parsers and the two verbs (kept out of cli.py)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tailscope.inject.kinds import KINDS, InjectInputError
from tailscope.node.lock import WAIT_MAX_S
from tailscope.options import SECONDS, TRIALS, number, whole

if TYPE_CHECKING:
    from tailscope.inject.control import Injection

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
WAIT = number(0, WAIT_MAX_S)
WAIT_HELP = (
    "seconds to wait while another tailscope is changing this node (one at a time: docs/inject.md; "
    "default 10 or $TAILSCOPE_NODE_LOCK_WAIT, then one line and exit 2; --restore: 0)"
)


class _Stop(Exception):
    pass


@contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGINT and SIGTERM end the injection through the normal unwinding (cleanup runs)."""

    def handler(signum: int, frame: object) -> None:
        raise _Stop(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def cmd_restore(wait_s: float | None) -> int:
    """`tailscope inject --restore`: put back what runs that are gone left in the node-state journal. While
    another tailscope holds the node lock it has put back what dead runs left when it took it: nothing to do
    (unless `--wait` was given: then it waits that long for the lock). A holder that keeps its journal
    elsewhere ($TAILSCOPE_JOURNAL_DIR: another suite's test) put back none of this one's: that is waited for
    as long as any verb waits (`default_wait`)."""
    from tailscope.node.journal import (
        NodeBusy,
        damaged_entries,
        existing_dirs,
        live_runs,
        restore_dead,
        restored_lines,
    )
    from tailscope.node.lock import default_wait

    dirs = existing_dirs()
    where = ", ".join(map(str, dirs)) or "no journal on this node"
    busy: NodeBusy | None = None
    try:
        restored = restore_dead(wait_s=wait_s or 0.0)
    except NodeBusy as exc:
        elsewhere = exc.holder is not None and exc.holder.journal not in {str(d) for d in dirs}
        if wait_s is None and elsewhere:  # NodeBusy after this wait: one line, exit 2, nothing done
            restored = restore_dead(wait_s=default_wait())
        else:
            busy, restored = exc, []
    if busy is not None:
        print(
            f"nothing to restore ({where}): {busy.who} holds the node lock; it put back what dead runs left "
            "when it took it"
        )
    else:
        lines = restored_lines(restored)
        for line in lines:
            print(line)
        if not lines:
            print(f"nothing to restore ({where})")
    damaged = damaged_entries()
    for d in damaged:
        print(d.line())
    for owner in live_runs():
        print(f"pid {owner.pid} still runs: what it changed is its own to undo (left alone)")
    return EXIT_FAILED if damaged or any(r.failed for r in restored) else EXIT_OK


def cmd_inject(args: argparse.Namespace) -> int:
    from tailscope.inject.control import Injection, online_cpus, parse_cpus
    from tailscope.node.journal import changing_the_node

    if args.restore:
        if args.kind is not None:
            raise InjectInputError(f"--restore takes no KIND (got {args.kind}): it restores every dead run's")
        return cmd_restore(args.wait)
    if args.kind is None:
        raise InjectInputError("inject: expected a KIND (or --restore); --help lists them")
    if args.cpus is not None:
        cpus = parse_cpus(args.cpus)
    else:
        cpus = [0] if args.kind != "cpu-quota" else online_cpus()
    inj = Injection.of(
        args.kind, args.intensity, cpus=cpus, pids=args.pid or [], cgroup=args.cgroup, reserve=args.reserve
    )
    with changing_the_node(args.wait):  # one at a time (--wait, else the default); dead runs' put back
        return _inject(inj, args.duration)


def _inject(inj: Injection, duration: float | None) -> int:
    from tailscope.inject.control import signals_deferred

    interrupted = None
    with _signals_stop():
        try:
            inj.start()
            print(json.dumps({**inj.ready, "kind": inj.kind.name, "intensity": inj.intensity}), flush=True)
            deadline = time.monotonic() + duration if duration else float("inf")
            while time.monotonic() < deadline and inj.running():
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        except _Stop as exc:
            interrupted = str(exc)
        finally:
            with signals_deferred():
                inj.stop()
    if inj.done:
        print(json.dumps(inj.done))
    if inj.returncode not in (None, 0, -signal.SIGTERM):
        why = inj.error or f"exit status {inj.returncode}"
        print(
            f"tailscope: {inj.kind.name}: the injector ended on its own: {why}; cleaned up", file=sys.stderr
        )
        return EXIT_FAILED
    print(f"{inj.kind.name}: stopped{f' by {interrupted}' if interrupted else ''}; cleaned up")
    return EXIT_OK


def add_inject_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    kinds = "; ".join(f"{k.name}: {k.intensity}" for k in KINDS.values())
    p = sub.add_parser(
        "inject",
        help="run one fault injector in the foreground (until --duration or Ctrl-C)",
        description=f"Intensity per kind -- {kinds}.",
    )
    p.add_argument("kind", nargs="?", choices=list(KINDS), metavar="KIND", help=", ".join(KINDS))
    p.add_argument("--intensity", type=number(0, lo_open=True), metavar="X", help="see the kinds above")
    p.add_argument("--cpus", metavar="LIST", help="CPUs to act on (default 0; cpu-quota: all, for its size)")
    p.add_argument(
        "--duration", type=SECONDS, metavar="S", help="seconds, at most a week (default: until Ctrl-C)"
    )
    p.add_argument(
        "--pid", type=whole(1, 1 << 22), action="append", help="cpu-quota: a process to put under the quota"
    )
    p.add_argument("--cgroup", type=Path, metavar="DIR", help="cpu-quota: a cgroup whose quota to set")
    p.add_argument("--reserve", metavar="BYTES", help="memory kinds: MemAvailable to leave (default 1g)")
    p.add_argument("--wait", type=WAIT, metavar="S", help=WAIT_HELP)
    p.add_argument(
        "--restore",
        action="store_true",
        help="restore what runs that are gone (killed, even by SIGKILL) left changed on this node, from the "
        "node-state journal (docs/inject.md); a live run's changes are never touched",
    )
    p.set_defaults(func=cmd_inject)

    p = sub.add_parser(
        "validate",
        help="a campaign with a random, recorded schedule of injections; scores tailscope's answers",
    )
    p.add_argument("--injectors", metavar="K1,K2", help="injectors to use (default: all that can act here)")
    p.add_argument("--trials", type=TRIALS, default=200, metavar="N", help="trials in all (default 200)")
    p.add_argument("--campaign", type=Path, metavar="DIR", help="campaign directory (default: a new one)")
    p.add_argument(
        "--seed", type=whole(0, (1 << 63) - 1), metavar="S", help="schedule seed (default: random, recorded)"
    )
    p.add_argument("--probe", default="stream", help="probe every trial runs (default stream)")
    p.add_argument("--param", action="append", metavar="K=V", help="probe option, e.g. page=thp (repeatable)")
    p.add_argument(
        "--block", type=whole(1, 100_000), default=4, metavar="B", help="trials per block (default 4)"
    )
    p.add_argument(
        "--inject-fraction",
        type=number(0, 1, lo_open=True, hi_open=True),
        default=0.25,
        metavar="F",
        help="share of blocks injected (0.25: the node median, the analysis' reference, stays a clean one)",
    )
    p.add_argument("--reserve", default="512m", metavar="BYTES", help="memory kinds leave this (512m)")
    p.add_argument(
        "--until-settled",
        action="store_true",
        help="rounds instead of blocks: after a clean baseline, each round (clean or one injection) runs "
        "until its verdict against the baseline settles; scores the false-alarm rate and trials to a verdict",
    )
    p.add_argument(
        "--rounds",
        type=whole(2, 10_000),
        default=20,
        metavar="R",
        help="--until-settled: rounds (default 20)",
    )
    p.add_argument(
        "--cap",
        type=whole(3, 100_000),
        default=30,
        metavar="N",
        help="--until-settled: trials a round at most (30)",
    )
    p.add_argument("--json", action="store_true", help="the scores as JSON")
    p.add_argument(
        "--rescore",
        action="store_true",
        help="score the validate campaign --campaign DIR again (no trials run)",
    )
    p.add_argument("--wait", type=WAIT, metavar="S", help=WAIT_HELP)
    p.add_argument("--no-progress", action="store_true")  # its verb: tailscope.verbs.validate (cli.py)

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

from tailscope.inject.kinds import KINDS, InjectInputError
from tailscope.options import TRIALS, whole

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


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


def cmd_inject(args: argparse.Namespace) -> int:
    from tailscope.inject.control import Injection, online_cpus, parse_cpus

    cpus = parse_cpus(args.cpus) if args.cpus else ([0] if args.kind != "cpu-quota" else online_cpus())
    if args.duration is not None and not args.duration > 0:
        raise InjectInputError(f"--duration {args.duration}: expected seconds above 0")
    inj = Injection.of(
        args.kind, args.intensity, cpus=cpus, pids=args.pid or [], cgroup=args.cgroup, reserve=args.reserve
    )
    interrupted = None
    with _signals_stop():
        try:
            inj.start()
            print(json.dumps({**inj.ready, "kind": inj.kind.name, "intensity": inj.intensity}), flush=True)
            deadline = time.monotonic() + args.duration if args.duration else float("inf")
            while time.monotonic() < deadline and inj.running():
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        except _Stop as exc:
            interrupted = str(exc)
        finally:
            old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                inj.stop()
            finally:
                for s, h in old.items():
                    signal.signal(s, h)
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


def cmd_validate(args: argparse.Namespace) -> int:
    from tailscope.inject.validate import ValidateRequest, render_scores, rescore, run_validate

    if args.rescore:
        if args.campaign is None:
            raise InjectInputError("--rescore needs --campaign DIR (a campaign `validate` wrote)")
        result = rescore(args.campaign)
        if args.json:
            json.dump(result, sys.stdout, indent=1, default=str)
            sys.stdout.write("\n")
        else:
            print("\n".join(render_scores(result)))
        return EXIT_OK
    if args.trials < 4:
        raise InjectInputError(f"--trials {args.trials}: expected at least 4")
    if args.block < 1:
        raise InjectInputError(f"--block {args.block}: expected at least 1")
    if not 0 < args.inject_fraction < 1:
        raise InjectInputError(f"--inject-fraction {args.inject_fraction}: expected a fraction in (0, 1)")
    request = ValidateRequest(
        injectors=tuple(args.injectors.split(",")) if args.injectors else None,
        trials=args.trials,
        campaign_dir=args.campaign,
        seed=args.seed,
        probe=args.probe,
        probe_params=_key_values(args.param or []),
        block=args.block,
        inject_fraction=args.inject_fraction,
        reserve=args.reserve,
        show_progress=not args.no_progress and not args.json,
    )
    result = run_validate(request)
    if args.json:
        json.dump(result, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        print("\n".join(render_scores(result)))
    return EXIT_INTERRUPTED if result.get("interrupted") else EXIT_OK


def _key_values(given: list[str]) -> dict[str, str]:
    """`--param K=V` options as a dict; one without '=' or without a key is refused with the option."""
    out = {}
    for text in given:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise InjectInputError(f"--param {text!r}: expected K=V, a probe option and its value (page=thp)")
        out[key.strip()] = value
    return out


def add_inject_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    kinds = "; ".join(f"{k.name}: {k.intensity}" for k in KINDS.values())
    p = sub.add_parser(
        "inject",
        help="run one fault injector in the foreground (until --duration or Ctrl-C)",
        description=f"Intensity per kind -- {kinds}.",
    )
    p.add_argument("kind", choices=list(KINDS), metavar="KIND", help=", ".join(KINDS))
    p.add_argument("--intensity", type=float, metavar="X", help="see the kinds above (default per kind)")
    p.add_argument("--cpus", metavar="LIST", help="CPUs to act on (default 0; cpu-quota: all, for its size)")
    p.add_argument("--duration", type=float, metavar="S", help="seconds (default: until SIGINT/SIGTERM)")
    p.add_argument("--pid", type=int, action="append", help="cpu-quota: a process to put under the quota")
    p.add_argument("--cgroup", type=Path, metavar="DIR", help="cpu-quota: a cgroup whose quota to set")
    p.add_argument("--reserve", metavar="BYTES", help="memory kinds: MemAvailable to leave (default 1g)")
    p.set_defaults(func=cmd_inject)

    p = sub.add_parser(
        "validate",
        help="a campaign with a random, recorded schedule of injections; scores tailscope's answers",
    )
    p.add_argument("--injectors", metavar="K1,K2", help="injectors to use (default: all that can act here)")
    p.add_argument("--trials", type=TRIALS, default=200, metavar="N", help="trials in all (default 200)")
    p.add_argument("--campaign", type=Path, metavar="DIR", help="campaign directory (default: a new one)")
    p.add_argument("--seed", type=int, metavar="S", help="schedule seed (default: random, recorded)")
    p.add_argument("--probe", default="stream", help="probe every trial runs (default stream)")
    p.add_argument("--param", action="append", metavar="K=V", help="probe option, e.g. page=thp (repeatable)")
    p.add_argument(
        "--block", type=whole(1, 100_000), default=4, metavar="B", help="trials per block (default 4)"
    )
    p.add_argument(
        "--inject-fraction",
        type=float,
        default=0.25,
        metavar="F",
        help="share of blocks injected (0.25: the node median, the analysis' reference, stays a clean one)",
    )
    p.add_argument("--reserve", default="512m", metavar="BYTES", help="memory kinds leave this (512m)")
    p.add_argument("--json", action="store_true", help="the scores as JSON")
    p.add_argument(
        "--rescore",
        action="store_true",
        help="score the validate campaign --campaign DIR again (no trials run)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_validate)

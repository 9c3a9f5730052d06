"""`tailscope metrics DIR [--node N] [--from-sample A --to-sample B | --from T0 --to T1] [--json]`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tailscope.counters.errors import MetricsInputError


def cmd_metrics(args: argparse.Namespace) -> int:
    from tailscope.counters.metrics import campaign_metrics, parse_time, run_metrics

    by_sample = args.from_sample is not None or args.to_sample is not None
    by_time = args.t_from is not None or args.t_to is not None
    if by_sample and by_time:
        raise MetricsInputError("metrics: give --from-sample/--to-sample or --from/--to, not both")
    if args.trial is not None:
        if by_sample or by_time or args.source is not None:
            raise MetricsInputError(
                "metrics: --trial reads one run's counters; it takes no interval or --source"
            )
        result = run_metrics(args.campaign, trial=args.trial, node=args.node, probe=args.probe)
    else:
        result = campaign_metrics(
            args.campaign,
            node=args.node,
            source=args.source,
            from_sample=args.from_sample,
            to_sample=args.to_sample,
            t0_ns=parse_time(args.t_from) if args.t_from is not None else None,
            t1_ns=parse_time(args.t_to) if args.t_to is not None else None,
        )
    if args.json:
        from tailscope.jsonout import write_json

        write_json(result, sort_keys=True)
        return 0
    what = (
        f"{result['probe']} trial {result['trial']}"
        if "trial" in result
        else f"({result['source']}): samples {result['from_sample']}..{result['to_sample']}"
    )
    print(f"node {result['node']} {what}, {result['seconds']:.6g} s, TSC {_fmt(result['tsc_ghz'])} GHz")
    for pmu, m in result["system"].items():
        print(f"system {pmu}: {_fmt(m['ghz'])} GHz  IPC {_fmt(m['ipc'])}")
    for cpu, m in result["cpus"].items():
        print(
            f"cpu {cpu:>4}: {_fmt(m['ghz'])} GHz  IPC {_fmt(m['ipc'])}  halted {_fmt(m['fraction_halted'])}"
        )
    for socket, m in result["sockets"].items():
        print(
            f"socket {socket}: DRAM read {_fmt(m['dram_read_gbs'])} GB/s, write "
            f"{_fmt(m['dram_write_gbs'])} GB/s; "
            f"pages hit {_fmt(m['page_hit'])} miss {_fmt(m['page_miss'])} conflict {_fmt(m['page_conflict'])}"
        )
    for kind, sockets in result["units"].items():
        for socket, boxes in sockets.items():
            for box, events in boxes.items():
                text = ", ".join(f"{e} {v:.0f}" for e, v in sorted(events.items()))
                print(f"{kind} {socket}/{box}: {text}")
    return 0


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"


def add_metrics_parser(sub: Any) -> None:
    p = sub.add_parser(
        "metrics", help="the seed's derived counter metrics over an interval of a node's samples"
    )
    p.add_argument("campaign", type=Path, metavar="DIR")
    p.add_argument("--node", help="node (needed when several have samples)")
    p.add_argument("--source", help="samples source (needed when a node has several)")
    p.add_argument("--from-sample", type=int, metavar="A", help="first sample (default: the first)")
    p.add_argument("--to-sample", type=int, metavar="B", help="last sample (default: the last)")
    p.add_argument("--from", dest="t_from", metavar="T0", help="start time: epoch seconds or ISO 8601")
    p.add_argument("--to", dest="t_to", metavar="T1", help="end time: epoch seconds or ISO 8601")
    p.add_argument(
        "--trial",
        type=int,
        metavar="N",
        help="one run's counters instead of samples (e.g. a likwid-csv import)",
    )
    p.add_argument("--probe", help="with --trial: the run's probe (needed when several have trial N)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_metrics)

"""`tailscope facts`: this node's facts and tuning advice."""

from __future__ import annotations

import argparse

from tailscope.errors import EXIT_OK


def facts(args: argparse.Namespace) -> int:
    from tailscope.counters.eventsets import for_node
    from tailscope.node.build import limit_lines
    from tailscope.node.facts import NODE_COLUMNS, collect
    from tailscope.node.hugepages import advice_lines
    from tailscope.node.knobs import advice

    found = collect()
    if args.json:
        from tailscope.jsonout import write_json

        write_json(found, sort_keys=True)
        return EXIT_OK
    for key in ("node", *NODE_COLUMNS):  # the columns of the nodes table, in its order
        print(f"{key:16s} {found.get(key)}")
    event_set, why = for_node(found)
    print(f"{'cpu_part':16s} {found.get('cpu_part') or 'not a part tailscope knows'}")
    print(f"{'event_set':16s} {event_set} ({why})")
    if found.get("cpu_part_note"):
        print(f"part: {found['cpu_part_note']}")
    for line in advice(found):
        print(f"advice: {line}")
    print("\n".join(advice_lines(found)))
    for line in limit_lines(found):
        print(f"limits: {line}")
    return EXIT_OK

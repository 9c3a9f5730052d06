"""`tailscope facts`: this node's facts and tuning advice."""

from __future__ import annotations

import argparse

from tailscope.errors import EXIT_OK


def facts(args: argparse.Namespace) -> int:
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
    for line in advice(found):
        print(f"advice: {line}")
    print("\n".join(advice_lines(found)))
    for line in limit_lines(found):
        print(f"limits: {line}")
    return EXIT_OK

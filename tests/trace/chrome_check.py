"""Chrome trace JSON: the schema kept here plus structure (B/E balance and nesting per thread, time order)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA = json.loads((Path(__file__).parent / "chrome_schema.json").read_text())


def check_chrome(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)
    stacks: dict[tuple[int, int], list[str]] = defaultdict(list)
    last: dict[tuple[int, int], float] = {}
    for ev in doc["traceEvents"]:
        if ev["ph"] in ("B", "E"):
            key = (ev["pid"], ev["tid"])
            assert ev["ts"] >= last.get(key, 0.0), f"{key}: ts goes backwards at {ev}"
            last[key] = ev["ts"]
            if ev["ph"] == "B":
                stacks[key].append(ev["name"])
            else:
                assert stacks[key] and stacks[key][-1] == ev["name"], f"{key}: E {ev['name']} unmatched"
                stacks[key].pop()
        if ev["ph"] == "X":
            assert ev["dur"] >= 0
    assert not any(stacks.values()), f"B without E: {dict(stacks)}"
    return doc

"""Fuzz campaign.json and the Slurm campaign spec: every mutated input is either accepted or refused with
one line naming the file (and, for the spec, the line); nothing else ever escapes (issue 9).

The fast suite runs a few hundred mutations of each; the slow suite runs 10,000 of each.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from spec_examples import FLEET_SPEC
from tailscope.campaign.spec import SpecError, load_spec
from tailscope.store.errors import StoreError
from tailscope.store.manifest import Manifest

VALID_MANIFEST: dict[str, Any] = {
    "format": "tailscope-campaign",
    "schema_version": 2,
    "campaign_id": "0123456789abcdef0123456789abcdef",
    "name": "demo",
    "created": "2026-11-24T16:30:00+00:00",
    "tool_version": "0.1.0",
    "plans": [
        {"variant": "l2sum-1a2b3c4d", "probe": "l2sum", "params": {"page": "2m"}, "trials": 200},
        {"variant": "imported:x", "probe": "imported:x", "params": {"groups": ["L2"]}, "trials": 3,
         "imported": True},
    ],
    "cluster": {
        "spec": "/x/fleet.toml", "partition": "batch", "nodelist": "n[1-3]", "node_count": None,
        "constraint": None, "events": None, "cluster_settings": {"alpha": 0.01},
        "jobs": [{"job_id": "17", "kind": "batch", "nodelist": "n[1-3]",
                  "submitted": "2026-11-24T16:31:00+00:00"}],
    },
    "sample_headers": {"n1": {"imported:perfcounts": {"tsc_hz": 2.1e9}}},
}  # fmt: skip


ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 2**63, 2**64 + 1, 1e308, -1e308, float("nan"), float("inf"), "", "x", "\n",
    "$(reboot)", "\x1b[2J", [], [1], {}, {"a": None}, "ö" * 3, [[]],
]  # fmt: skip


def _mutate_json(value: Any, rng: random.Random) -> Any:
    """Replace, delete or retype one node of a JSON document."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.2:
            del out[key]
        elif roll < 0.5:
            out[key] = rng.choice(ODD_VALUES)
        else:
            out[key] = _mutate_json(value[key], rng)
        return out
    if isinstance(value, list) and value and rng.random() < 0.8:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = _mutate_json(out[i], rng) if rng.random() < 0.6 else rng.choice(ODD_VALUES)
        return out
    return rng.choice(ODD_VALUES)


def _mutate_text(text: str, rng: random.Random) -> str:
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        i = rng.randrange(len(data))
        if roll < 0.3:
            data[i] = rng.randrange(256)
        elif roll < 0.5:
            del data[i : i + rng.randint(1, 20)]
        elif roll < 0.7:
            data[i:i] = rng.choice([b"\n", b"\"", b"[", b"]", b"=", b"\x00", b"\\u0000", b"9" * 30, b"\xff"])
        else:
            lines = data.split(b"\n")
            j = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[j])
            data = bytearray(b"\n".join(lines))
    return data.decode("utf-8", "replace")


def fuzz_manifest(tmp_path: Path, count: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    path = tmp_path / "campaign.json"
    accepted = refused = 0
    for n in range(count):
        if n % 3 == 0:
            text = _mutate_text(json.dumps(VALID_MANIFEST, indent=1), rng)
            path.write_bytes(text.encode("utf-8", "replace"))
        else:
            path.write_text(json.dumps(_mutate_json(VALID_MANIFEST, rng)))
        try:
            manifest = Manifest.load(path)
        except StoreError as exc:  # SchemaVersionError is an InputError too: see below
            message = str(exc)
            assert str(path) in message and "\n" not in message, message
            refused += 1
            continue
        except Exception as exc:
            from tailscope.errors import InputError

            assert isinstance(exc, InputError), f"{type(exc).__name__}: {exc}\n{path.read_text()[:2000]}"
            assert str(path) in str(exc)
            refused += 1
            continue
        json.dumps(manifest.to_json(), allow_nan=False)  # what is accepted can be written back
        accepted += 1
    return accepted, refused


def fuzz_spec(tmp_path: Path, count: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    path = tmp_path / "fleet.toml"
    accepted = refused = 0
    for _ in range(count):
        path.write_text(_mutate_text(FLEET_SPEC, rng))
        try:
            load_spec(path)
        except SpecError as exc:
            message = str(exc)
            assert message.startswith(f"{path}:") and message.split(":")[1].isdigit(), message
            refused += 1
            continue
        accepted += 1
    return accepted, refused


def test_valid_inputs_are_accepted(tmp_path):
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(VALID_MANIFEST))
    assert Manifest.load(path).plans[1].params == {"groups": ["L2"]}
    (tmp_path / "fleet.toml").write_text(FLEET_SPEC)
    assert load_spec(tmp_path / "fleet.toml").name == "fleet"


def test_fuzz_manifest_quick(tmp_path):
    accepted, refused = fuzz_manifest(tmp_path, 400, seed=1)
    assert refused > 100 and accepted + refused == 400


def test_fuzz_spec_quick(tmp_path):
    accepted, refused = fuzz_spec(tmp_path, 400, seed=1)
    assert refused > 100 and accepted + refused == 400


@pytest.mark.slow
def test_fuzz_manifest_10000(tmp_path):
    accepted, refused = fuzz_manifest(tmp_path, 10_000, seed=2)
    print(f"campaign.json fuzz: {accepted} accepted, {refused} refused with a file message, 0 crashes")
    assert accepted + refused == 10_000


@pytest.mark.slow
def test_fuzz_spec_10000(tmp_path):
    accepted, refused = fuzz_spec(tmp_path, 10_000, seed=2)
    print(f"spec fuzz: {accepted} accepted, {refused} refused with a file:line message, 0 crashes")
    assert accepted + refused == 10_000


@pytest.mark.parametrize(
    "section, key, value",
    [
        ("campaign", "name", '"fleet\\nrm -rf /"'),
        ("slurm", "partition", '"batch\\n#SBATCH --wrap=evil"'),
        ("slurm", "nodes", '"n[1-3]\\r"'),
        ("slurm", "sbatch_options", '["--account=ops\\n"]'),
    ],
)
def test_control_characters_in_the_spec_are_refused_naming_key_and_line(tmp_path, section, key, value):
    lines = FLEET_SPEC.splitlines()
    start = lines.index(f"[{section}]")
    for i in range(start + 1, len(lines)):
        if lines[i].startswith(f"{key} ="):
            lines[i] = f"{key} = {value}"
            line_number = i + 1
            break
    path = tmp_path / "fleet.toml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}:{line_number}: {section}.{key}: control character")

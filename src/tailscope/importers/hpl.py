"""HPL results of other runs: xhpl's output (HPL.out or stdout) and hpcc's `hpccoutf.txt`.

One trial per result line. HPL writes, per test (HPL_pdtest.c; hpcc embeds HPL 2.0 in its "HPL section"):

    T/V                N    NB     P     Q               Time                 Gflops
    WR11C2R4        1000   128     1     2               0.28              2.373e+00
    ||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=        0.0034753 ...... PASSED

The `T/V` field is W (wall time) plus the encoded variant; the residual line that follows says whether the
solve passed HPL's check (scaled residual below the threshold, 16 by default). A result whose residual
FAILED is stored with status `invalid`, no value and no iteration, so it never enters a median (a wrong answer
is not a fast run): the rule `tailscope run hpl` follows, where the probe exits 4 on a FAILED check. hpcc
appends every run to the same file: each run's HPL section gives one trial, in file order.
Trials are grouped into variants `imported:hpl` with params {n, nb, p, q} (different problem sizes are
different variants), value GFLOPS (higher is better), one iteration (the solve's seconds).

The SJTU acceptance rule (seed 003, "HPL-Light": N = 32768, NB = 128, 500 runs on one node; pass when
(q01 - median) / median > -0.5 %) is then `tailscope analyze DIR --max-q01-drop 0.005`.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tailscope.importers import ImportInputError
from tailscope.store.campaign import utcnow
from tailscope.store.load import Transaction
from tailscope.store.manifest import Plan
from tailscope.store.schema import TABLES

# WR11C2R4  1000  128  1  2  0.28  2.373e+00: variant, N, NB, P, Q, seconds, GFLOPS (HPL_pdtest.c's format)
_RESULT = re.compile(
    r"^(?P<tv>W[RC]\w*)\s+(?P<n>\d+)\s+(?P<nb>\d+)\s+(?P<p>\d+)\s+(?P<q>\d+)\s+"
    r"(?P<time>[0-9.eE+-]+)\s+(?P<gflops>[0-9.eE+-]+)\s*$"
)
# ||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=   0.0034753 ...... PASSED (HPL 2.x; 1.0 prints 3 lines)
_RESIDUAL = re.compile(r"^\|\|Ax-b\|\|_oo.*=\s*(?P<resid>[0-9.eE+-]+)\s+\.+\s+(?P<verdict>PASSED|FAILED)\s*$")


@dataclass(frozen=True)
class HplResult:
    line: int  # line of the WR line in the file
    variant_code: str  # WR11C2R4
    n: int
    nb: int
    p: int
    q: int
    seconds: float
    gflops: float
    residual: float | None
    passed: bool | None  # None: no residual line followed (HPL run without checks)

    @property
    def params(self) -> dict[str, int]:
        return {"n": self.n, "nb": self.nb, "p": self.p, "q": self.q}


def parse_hpl(text: str, *, source: str = "HPL output") -> list[HplResult]:
    """Every result line of an xhpl or hpcc output, with the residual check that follows it."""
    results: list[HplResult] = []
    pending: dict[str, Any] | None = None

    def close(resid: float | None, passed: bool | None) -> None:
        assert pending is not None
        results.append(HplResult(**pending, residual=resid, passed=passed))

    for lineno, line in enumerate(text.splitlines(), start=1):
        match = _RESULT.match(line.strip())
        if match:
            if pending is not None:
                close(None, None)
            try:
                pending = {
                    "line": lineno,
                    "variant_code": match["tv"],
                    "n": int(match["n"]),
                    "nb": int(match["nb"]),
                    "p": int(match["p"]),
                    "q": int(match["q"]),
                    "seconds": float(match["time"]),
                    "gflops": float(match["gflops"]),
                }
            except ValueError:
                raise ImportInputError(
                    f"{source}:{lineno}: malformed HPL result line: {line.strip()}"
                ) from None
            continue
        match = _RESIDUAL.match(line.strip())
        if match and pending is not None:
            try:
                residual = float(match["resid"])
            except ValueError:  # the pattern takes digits and signs; '4.1--5e-03' is no number
                raise ImportInputError(
                    f"{source}:{lineno}: malformed HPL residual line: {line.strip()}"
                ) from None
            close(residual, match["verdict"] == "PASSED")
            pending = None
    if pending is not None:
        close(None, None)
    if not results:
        raise ImportInputError(
            f"{source}: no HPL result lines (expected lines like "
            "'WR11C2R4  1000  128  1  2  0.28  2.373e+00' after the 'T/V  N  NB  P  Q  Time  Gflops' header)"
        )
    return results


def import_hpl(path: Path, load: Transaction, *, node: str, task: str) -> dict[str, int]:
    """Parse `path` fully, refuse a file already imported (the load path's one rule), stage one chunk."""
    try:
        data = path.read_bytes()
        text = data.decode("utf-8", errors="strict")
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot open ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ImportInputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    results = parse_hpl(text, source=str(path))
    load.record_source(hashlib.sha256(data).hexdigest(), str(path))
    probe = "imported:hpl"
    per_variant: dict[str, int] = {}
    for r in results:
        variant = "imported:hpl-" + "-".join(f"{k}{v}" for k, v in sorted(r.params.items()))
        per_variant[variant] = per_variant.get(variant, 0) + 1
    trials_before = {v: load.claim_next_trials(node, v, n)[0] for v, n in per_variant.items()}
    now = utcnow()
    runs: list[dict[str, Any]] = []
    iterations: list[dict[str, Any]] = []
    trial_of: dict[str, int] = {}
    plans: dict[str, dict[str, Any]] = {}
    for r in results:
        params = r.params
        variant = "imported:hpl-" + "-".join(f"{k}{v}" for k, v in sorted(params.items()))
        trial = trial_of.get(variant, trials_before[variant])
        trial_of[variant] = trial + 1
        run_id = uuid.uuid4().hex
        ok = r.passed is not False
        runs.append(
            {
                "run_id": run_id,
                "campaign": load.campaign_id,
                "node": node,
                "probe": probe,
                "variant": variant,
                "params": json.dumps(params, sort_keys=True),
                "trial": trial,
                "threads": r.p * r.q,
                "started_at": now,
                "seconds": r.seconds,
                "metric": "gflops",
                "value": r.gflops if ok else None,
                "unit": "GFLOPS",
                "higher_is_better": True,
                "status": "ok" if ok else "invalid",
                "error": None if ok else f"HPL residual check FAILED (scaled residual {r.residual})",
                "source": "import:hpl",
                "task": task,
                "summary": json.dumps(
                    {
                        "source_file": path.name,
                        "line": r.line,
                        "tv": r.variant_code,
                        "residual": r.residual,
                        "residual_check": None if r.passed is None else ("PASSED" if r.passed else "FAILED"),
                    }
                ),
            }
        )
        if ok:  # a wrong answer has no valid timing (the probes' rule: no iterations after a failed check)
            iterations.append(
                {"run_id": run_id, "iteration": 0, "warmup": False, "seconds": r.seconds, "value": r.gflops}
            )
        plans[variant] = {"variant": variant, "probe": probe, "params": params}
    for variant, plan in plans.items():
        load.add_plan(Plan(variant, probe, dict(plan["params"]), trial_of[variant], imported=True))
    load.write("runs", pa.Table.from_pylist(runs, schema=TABLES["runs"].schema), node=node)
    load.write("iterations", pa.Table.from_pylist(iterations, schema=TABLES["iterations"].schema), node=node)
    return {
        "runs": len(runs),
        "failed_residual": sum(1 for r in results if r.passed is False),
        "variants": len(plans),
    }

"""Where the tailscope these tests imported lives, for the tailscope a test starts as a child process.

CI installs the package (`pip install .`): its native probes and libraries sit beside the installed modules,
and src/ holds none. A child given src/ on its PYTHONPATH looks for the probes there and fails, so a child
(and a Prolog/Epilog wrapper's PYTHONPATH=) gets the directory of the package this process imported: the
installed one in CI, the source tree where a developer put it first.
"""

from __future__ import annotations

import os
from pathlib import Path

import tailscope

PACKAGE_ROOT = Path(tailscope.__file__).resolve().parents[1]


def tailscope_env(base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """`base` (default: this process's environment) with PACKAGE_ROOT first on PYTHONPATH, then `extra`."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env

"""Where a node's facts are read from: the system this process runs on, or a recorded host description.

A recorded host is a directory laid out like the root of a Linux system that holds only what the node facts
read, each file in the kernel's own format: `proc/cpuinfo`, `sys/devices/system/cpu/...` (topology, cache,
cpufreq), `sys/devices/system/node/...`, and where the recording has them `sys/class/dmi/id/*`,
`sys/hypervisor/type`, `proc/sys/abi/sve_default_vector_length`, `sys/bus/event_source/devices`. What is no
file (uname's machine and release) is in `host.toml` beside them:

    [host]
    machine = "x86_64"          # uname -m
    release = "5.14.0-362.el9"  # uname -r, where the recording has it

Every reader that takes a `Host` reads `host.path("/proc/cpuinfo")` instead of `/proc/cpuinfo`, so the code
that runs on a node is the code the tests feed with recorded nodes (tests/hosts/). `THIS` is the running
system.
"""

from __future__ import annotations

import platform
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tailscope.node.read import read_int, read_text


@dataclass(frozen=True)
class Host:
    root: Path = Path("/")
    machine_name: str | None = None  # uname -m of the recorded node; None: this process's
    release_name: str | None = None  # uname -r of the recorded node; None: this kernel's

    def path(self, absolute: str | Path) -> Path:
        """Where `/proc/...` or `/sys/...` of this host is."""
        return self.root / str(absolute).lstrip("/")

    def text(self, absolute: str | Path) -> str | None:
        return read_text(self.path(absolute))

    def int(self, absolute: str | Path) -> int | None:
        return read_int(self.path(absolute))

    @property
    def machine(self) -> str:
        return self.machine_name or platform.machine()

    @property
    def release(self) -> str:
        return self.release_name or platform.release()

    @property
    def recorded(self) -> bool:
        return self.root != Path("/")


THIS = Host()


def recorded(directory: str | Path) -> Host:
    """The host recorded in `directory` (its host.toml says the machine and release; ValueError names a
    host.toml that cannot be read)."""
    root = Path(directory)
    meta = root / "host.toml"
    try:
        doc = tomllib.loads(meta.read_text()) if meta.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{meta}: not a host description ({exc})") from None
    host = doc.get("host", {})
    return Host(root, host.get("machine"), host.get("release"))

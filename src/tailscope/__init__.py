"""tailscope: find, explain and remove performance variability on HPC compute nodes."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`tailscope.__version__`, looked up on first use: importlib.metadata costs more than argparse."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    found = _dist_info_version()
    if found is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("tailscope")
        except PackageNotFoundError:  # running from a source tree that was never installed
            found = "0.0.0+source"
    globals()["__version__"] = found
    return found


def _dist_info_version() -> str | None:
    """The Version line of the installed `tailscope-*.dist-info/METADATA` first found on sys.path (where
    importlib.metadata looks first too), or None for anything unusual (importlib.metadata then decides).
    Every new campaign records the version: importing importlib.metadata for it was 12 ms of an import
    command's start."""
    import os
    import sys

    for entry in sys.path:
        try:
            listed = os.listdir(entry or ".")
        except OSError:
            continue
        names = [n for n in listed if n.startswith("tailscope-") and n.endswith(".dist-info")]
        if len(names) != 1:
            if names:
                return None  # two installs side by side: importlib.metadata's choice
            continue
        try:
            with open(os.path.join(entry or ".", names[0], "METADATA"), encoding="utf-8") as fh:
                for line in fh:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip() or None
                    if not line.strip():
                        break  # the headers end here
        except OSError:
            return None
        return None
    return None

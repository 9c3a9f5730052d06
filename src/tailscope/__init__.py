"""tailscope: find, explain and remove performance variability on HPC compute nodes."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`tailscope.__version__`, looked up on first use: importlib.metadata costs more than argparse."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("tailscope")
    except PackageNotFoundError:  # running from a source tree that was never installed
        found = "0.0.0+source"
    globals()["__version__"] = found
    return found

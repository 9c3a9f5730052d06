"""tailscope: find, explain and remove performance variability on HPC compute nodes."""

from __future__ import annotations

import os


def __getattr__(name: str) -> str:
    """`tailscope.__version__`, looked up on first use (each new campaign records it).

    The version has one place, pyproject.toml; an installed package carries it in the name of its
    `tailscope-<version>.dist-info` directory beside the package, read here with one listdir (0.1 ms).
    importlib.metadata, the fallback (editable or unusual installs), costs 20 ms on a cold start: a fifth of
    what `tailscope import` adds to Python and pyarrow's start-up."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    found = _version_beside_package()
    if found is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("tailscope")
        except PackageNotFoundError:  # running from a source tree that was never installed
            found = "0.0.0+source"
    globals()["__version__"] = found
    return found


def _version_beside_package() -> str | None:
    site = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        names = os.listdir(site)
    except OSError:
        return None
    found = [n[len("tailscope-") : -len(".dist-info")] for n in names if n.startswith("tailscope-")
             and n.endswith(".dist-info")]  # fmt: skip
    return found[0] if len(found) == 1 else None  # two dist-infos: a broken install; let importlib judge

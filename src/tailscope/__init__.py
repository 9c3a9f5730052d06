"""tailscope: find, explain and remove performance variability on HPC compute nodes."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tailscope")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

"""The importer fuzzers run under an address-space limit: an input that makes an importer allocate gigabytes
fails its test (MemoryError, shown with the input) instead of taking the machine's memory."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

HEADROOM_BYTES = 6 << 30  # above what the test process has mapped already


def _mapped_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * resource.getpagesize()


@pytest.fixture(autouse=True)
def bounded_memory(request: pytest.FixtureRequest) -> Iterator[None]:
    if "fuzz" not in request.node.name:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _mapped_bytes() + HEADROOM_BYTES
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

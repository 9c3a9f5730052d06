"""Suite-wide fixtures and markers (slow, root, browser: see pyproject.toml)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hosts.hostroot import materialize
from tailscope.node.host import Host, recorded
from tailscope.node.lock import WAIT_ENV

# The node lock is the node's (/run/tailscope/node.lock for root): a tailscope injecting beside the suite (a
# user's, another checkout's suite) holds it for minutes, and a test that changes the node waits its turn, as
# a second injector would with --wait, instead of failing after the default 10 s. Below the 600 s test
# timeout, so a holder that never ends is one line naming it. Tests of the wait itself pass --wait.
os.environ.setdefault(WAIT_ENV, "480")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (pagemap frame numbers, hugetlb reservation, Slurm daemons)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


# Property tests run the same examples every time (CI and a developer see the same inputs; a failure found
# once is found again): hypothesis' derandomized profile.
try:
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("tailscope", derandomize=True, print_blob=True)
    _hypothesis_settings.load_profile("tailscope")
except ImportError:  # pragma: no cover - hypothesis is in the test extras
    pass


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[tuple[str, Path]]:
    """A real PostgreSQL server for the session (tests/pgserver.py): (URL of database `hist`, socket dir)."""
    from pgserver import running_server

    with running_server() as server:
        yield server


@pytest.fixture(scope="session")
def host_root(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Host]:
    """name -> the recorded real node tests/hosts/NAME.toml as a host root (node/host.py), written under a
    session directory the first time a test asks for it."""
    made: dict[str, Host] = {}
    base: Path = tmp_path_factory.mktemp("hosts")

    def get(name: str) -> Host:
        if name not in made:
            made[name] = recorded(materialize(name, base / name))
        return made[name]

    return get


@pytest.fixture
def ctrl_c_as_from_a_shell() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in this process for the test, as in a Python started from a terminal:
    a suite started in the background of a non-interactive shell (`make test &`, some CI runners) inherits
    SIGINT ignored, and Python then keeps it ignored, so a test of what Ctrl-C does would see nothing."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


NOBODY = 65534  # the user a test runs a job or reads a job's output as (Debian's nobody/nogroup)


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    """A directory of the user nobody on a path nobody may walk (pytest's own temporary directory is root's,
    0700): where a job of another user writes, or its files are read as it. Root only."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="tailscope-nobody-"))
    top.chmod(0o755)
    work = top / "nobody"
    work.mkdir()
    os.chown(work, NOBODY, NOBODY)
    try:
        yield work
    finally:
        shutil.rmtree(top)

"""A real Slurm cluster (munged, slurmctld, 3 slurmd on loopback; with Debian's slurmdbd and mariadb-server
installed also MariaDB + slurmdbd, so sacct works) for the cluster tests, started once per test session.

`scripts/slurm-test-cluster` does the work; this fixture starts it in a temporary directory and always stops
it (also when a test fails). Tests that use it skip, with the reason, when not root or Slurm is missing;
those that need accounting use `slurm_accounting`, which skips without it.

Prolog and Epilog: the cluster runs every script in DIR/etc/prolog.d/ and DIR/etc/epilog.d/ (slurm.conf
`Prolog=DIR/etc/prolog.d/*`, `PrologFlags=Alloc`: on every node of a job at its allocation), with
PrologEpilogTimeout=PROLOG_EPILOG_TIMEOUT_S. Both directories hold a link to tailscope's wrapper
(scripts/slurm/tailscope-jobs, copied to DIR/etc/ with tailscope-slurm.sh and its tailscope-jobs.conf: this
tree's tailscope, records into DIR/history). A test adds a script of its own to either directory (and removes
it after); `jobs_conf()` changes the wrapper's configuration for the length of a test, `slurm_conf()`
slurm.conf's (PrologEpilogTimeout=..., through `scontrol reconfigure`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from installed import PACKAGE_ROOT

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "slurm-test-cluster"
WRAPPER = ROOT / "scripts" / "slurm" / "tailscope-jobs"
NODES = ("n1", "n2", "n3")
PROLOG_EPILOG_TIMEOUT_S = 6  # tailscope's own bound is 1.8 s; a hung script without one drains after this


class SlurmCluster(dict[str, str]):
    """The environment (SLURM_CONF, PATH with sbin) for Slurm clients and `tailscope campaign`, with where
    the cluster lives."""

    root: Path
    nodes: tuple[str, ...]
    accounting: bool

    @property
    def prolog_dir(self) -> Path:
        return self.root / "etc" / "prolog.d"

    @property
    def epilog_dir(self) -> Path:
        return self.root / "etc" / "epilog.d"

    @property
    def jobs_conf_path(self) -> Path:
        return self.root / "etc" / "tailscope-jobs.conf"

    @property
    def history(self) -> Path:
        return self.root / "history"

    def default_jobs_conf(self) -> str:
        return (
            f"PYTHON={sys.executable}\nPYTHONPATH={PACKAGE_ROOT}\nHISTORY={self.history}\n"
            f"ARGS=--state-dir {self.root / 'jobs-state'}\n"
        )

    @contextlib.contextmanager
    def jobs_conf(self, text: str) -> Iterator[None]:
        """The wrapper's configuration is `text` while the block runs (it is read by every prolog/epilog)."""
        self.jobs_conf_path.write_text(text)
        try:
            yield
        finally:
            self.jobs_conf_path.write_text(self.default_jobs_conf())

    @contextlib.contextmanager
    def slurm_conf(self, **settings: str) -> Iterator[None]:
        """slurm.conf has these KEY=VALUE settings while the block runs (`scontrol reconfigure`: slurmctld and
        every slurmd read them; verified for PrologEpilogTimeout), then its own again."""
        conf = Path(self["SLURM_CONF"])
        original = conf.read_text()
        lines = [line for line in original.splitlines() if line.split("=", 1)[0] not in settings]
        conf.write_text("\n".join([*lines, *(f"{k}={v}" for k, v in settings.items())]) + "\n")
        try:
            _reconfigure(self)
            yield
        finally:
            conf.write_text(original)
            _reconfigure(self)


def _reconfigure(env: dict[str, str], timeout: float = 60) -> None:
    """`scontrol reconfigure`, then every node answering again (no `*` in sinfo's state)."""
    subprocess.run(["scontrol", "reconfigure"], env=env, capture_output=True, timeout=60, check=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%t"], env=env, capture_output=True, text=True, timeout=60
        ).stdout.split()
        if states and not any(s.endswith("*") for s in states):
            return
        time.sleep(0.2)
    raise AssertionError(f"the nodes did not answer within {timeout:g} s of scontrol reconfigure")


def drained(env: dict[str, str]) -> dict[str, str]:
    """Nodes down or drained, with Slurm's reason (`sinfo -R`)."""
    out = subprocess.run(
        ["sinfo", "-R", "-h", "-o", "%N|%T|%E"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        nodes, _, rest = line.partition("|")
        for node in _expand(nodes):
            found[node] = rest
    return found


def _expand(nodes: str) -> list[str]:
    """`n[1-3]` / `n1,n3` as sinfo prints them (this cluster's names only: n1..n9)."""
    if "[" not in nodes:
        return [n for n in nodes.split(",") if n]
    prefix, _, inner = nodes.partition("[")
    out = []
    for part in inner.rstrip("]").split(","):
        lo, _, hi = part.partition("-")
        out += [f"{prefix}{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


def slurm_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root: slurmd and munged run as root in the test cluster"
    for tool in ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scancel", "scontrol"):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} not found: install the Debian packages slurm-wlm and munge"
    return None


def accounting_missing() -> str | None:
    for tool in ("slurmdbd", "mariadbd", "mariadb-install-db", "sacct"):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} not found: install the Debian packages slurmdbd and mariadb-server"
    return None


def _install_wrapper(cluster: SlurmCluster) -> None:
    etc = cluster.root / "etc"
    etc.mkdir()
    shutil.copy(WRAPPER, etc / "tailscope-jobs")
    shutil.copy(WRAPPER.parent / "tailscope-slurm.sh", etc)  # the wrappers' shared part, beside them
    cluster.jobs_conf_path.write_text(cluster.default_jobs_conf())
    for scripts in (cluster.prolog_dir, cluster.epilog_dir):
        scripts.mkdir()
        (scripts / "tailscope-jobs").symlink_to(etc / "tailscope-jobs")


def wait_idle(env: dict[str, str], timeout: float = 4 * PROLOG_EPILOG_TIMEOUT_S + 60) -> None:
    """Until no job is queued, running or completing (an epilog still running keeps its job in CG)."""
    deadline = time.monotonic() + timeout
    while True:
        left = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True, timeout=60).stdout
        if not left.strip():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"jobs still in the queue after {timeout:g} s:\n{left}")
        time.sleep(0.2)


@pytest.fixture(scope="session")
def slurm_session(request: pytest.FixtureRequest) -> Iterator[SlurmCluster]:
    reason = slurm_missing()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster()
    # Not under pytest's own temporary directory (root's, 0700): a job of another user (sbatch --uid) must
    # reach its script in slurmd's spool, as on a real node. Kept after a failed session, for its logs.
    cluster.root = Path(tempfile.mkdtemp(prefix="tailscope-slurm-"))
    cluster.root.chmod(0o755)
    cluster.nodes = NODES
    cluster.accounting = accounting_missing() is None
    _install_wrapper(cluster)
    argv = [sys.executable, str(SCRIPT), "start", str(cluster.root), "--nodes", str(len(NODES))]
    argv += ["--prolog", f"{cluster.prolog_dir}/*", "--epilog", f"{cluster.epilog_dir}/*"]
    argv += ["--prolog-epilog-timeout", str(PROLOG_EPILOG_TIMEOUT_S), "--conf", "PrologFlags=Alloc"]
    argv += ["--conf", "AccountingStoreFlags=job_comment"]  # sacct's Comment: a tailscope:NAME class tag
    if cluster.accounting:
        argv.append("--accounting")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    try:
        if proc.returncode != 0:
            pytest.fail(f"slurm-test-cluster start failed: {proc.stderr.strip()}")
        cluster.update(os.environ)
        cluster["SLURM_CONF"] = proc.stdout.strip().splitlines()[-1]
        cluster["PATH"] = f"{cluster.get('PATH', '')}:/usr/sbin"
        yield cluster
    finally:
        subprocess.run([sys.executable, str(SCRIPT), "stop", str(cluster.root)], timeout=180, check=False)
        if request.session.testsfailed:
            print(f"\nthe test cluster's files (logs): {cluster.root}")
        else:
            shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture
def slurm_cluster(slurm_session: SlurmCluster) -> SlurmCluster:
    """The session's cluster, once the jobs an earlier test left (an epilog still running) have ended: a
    test's own window in sacct, and its own job ids, hold only its jobs."""
    wait_idle(slurm_session)
    return slurm_session


@pytest.fixture
def slurm_accounting(slurm_cluster: SlurmCluster) -> SlurmCluster:
    """The session's cluster, where it has accounting (sacct reads slurmdbd's MariaDB)."""
    reason = accounting_missing()
    if reason:
        pytest.skip(reason)
    return slurm_cluster

"""The cached Debian root of the packaging and Arm tests: scripts/debian-root, from Python.

One root per (architecture, packages), built once by mmdebstrap and kept under /var/cache/tailscope-tests
(CI keeps that directory between runs on the same machine); a test copies this tree into the root and runs
there as an unprivileged user. Skips (with the reason) where the root cannot be built: not root, no
mmdebstrap, no network to the Debian mirror.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "debian-root"
CACHE = Path(os.environ.get("TAILSCOPE_TEST_CACHE", "/var/cache/tailscope-tests"))


def debian_root(packages: Sequence[str], *, arch: str | None = None, timeout: float = 900) -> Path:
    """The root's directory, building it the first time (minutes); pytest.skip where it cannot be built."""
    if os.geteuid() != 0:
        pytest.skip("building a Debian root needs root (mmdebstrap, chroot)")
    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap is not installed (packaging/debian-packages-test.txt)")
    argv = [str(SCRIPT), "path", "--packages", ",".join(packages)]
    if arch:
        argv += ["--arch", arch]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.skip(f"no Debian root could be built: {proc.stderr.strip()[-400:]}")
    return Path(proc.stdout.strip())


def copy_tree_into(root: Path, user: str) -> Path:
    """This checkout's files (tracked and untracked, not ignored) copied to ~USER/tailscope inside `root`,
    fresh, owned by USER; returns the path inside the root."""
    subprocess.run([str(SCRIPT), "run", str(root), "--user", user, "--", "true"], check=True)
    uid = int(subprocess.run(["chroot", str(root), "id", "-u", user], capture_output=True, text=True,
                             check=True).stdout)
    target = root / "home" / user / "tailscope"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        source = REPO / os.fsdecode(name)
        if source.is_file():
            dest = target / os.fsdecode(name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)
    for path in [target, *target.rglob("*")]:
        os.lchown(path, uid, uid)
    return Path("/home") / user / "tailscope"


def run_in(root: Path, user: str, script: str, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """`sh -c SCRIPT` as USER inside `root` (its home as the working directory), pip's download cache shared
    between runs."""
    uid = int(subprocess.run(["chroot", str(root), "id", "-u", user], capture_output=True, text=True,
                             check=True).stdout)
    pip_cache = CACHE / "pip-cache"
    pip_cache.mkdir(parents=True, exist_ok=True)
    os.chown(pip_cache, uid, uid)
    argv = [str(SCRIPT), "run", str(root), "--user", user, "--bind", f"{pip_cache}:/home/{user}/.cache/pip",
            "--", "sh", "-c", f"cd ~ && {script}"]
    # its own session, so a timeout (ours or pytest's) ends everything it started, the emulated compilers too
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)

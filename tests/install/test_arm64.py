"""tailscope on aarch64 under qemu-user (issue 27): pip install in an arm64 Debian root, then check and facts.

The root (Debian's arm64 python3, gcc, ccache and the -dev libraries tailscope builds against) is made once by
scripts/debian-root with mmdebstrap and cached; its binaries run through binfmt_misc and qemu-aarch64-static.
Inside it, as an ordinary user: `pip install` of this tree (the native probes compiled by the arm64 gcc), then
`tailscope facts` says it is emulated, `tailscope run arith --trials 1` prints the seed's arith table, and
`tailscope check --quick --trials 2` ends inconclusive (emulated), exit 3, with a report.
Timings mean nothing under emulation; only the contract is checked.

Everything runs emulated, so a cold run takes tens of minutes (pip unpacking numpy, pyarrow and scipy under
qemu, gcc compiling every probe). What does not change between runs is kept in the cached root: a venv with
the dependencies, keyed by pyproject.toml's dependency lists (a change there reinstalls everything, with
`pip install` of the tree as a user would), and ccache's objects. A warm run reinstalls only tailscope itself
(`pip install --no-deps --no-build-isolation`, the same build through scikit-build-core).
"""

from __future__ import annotations

import hashlib
import re
import tomllib

import pytest

from .debian_root import REPO, copy_tree_into, debian_root, run_in

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(3600)]

ARM64 = ("python3", "python3-venv", "python3-dev", "gcc", "g++", "make", "libopenblas-dev", "libnuma-dev",
         "libhwloc-dev", "hwloc", "libpfm4-dev", "ccache")  # fmt: skip
USER = "tsuser"
ENV = "export CCACHE_DIR=$HOME/.ccache CMAKE_C_COMPILER_LAUNCHER=ccache &&"


def _dependency_key() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    lists = [project["build-system"]["requires"], project["project"]["dependencies"]]
    return hashlib.sha256(repr(lists).encode()).hexdigest()[:12]


def test_pip_install_and_check_on_emulated_aarch64():
    root = debian_root(ARM64, arch="arm64", timeout=3000)
    tree = copy_tree_into(root, USER)
    venv = f"venv-{_dependency_key()}"
    if (root / "home" / USER / venv / ".complete").exists():
        script = f"{ENV} {venv}/bin/pip install -q --no-deps --no-build-isolation --force-reinstall {tree}"
    else:
        script = (f"{ENV} rm -rf venv-* && python3 -m venv {venv} && {venv}/bin/pip install -q {tree} && "
                  f"{venv}/bin/pip install -q scikit-build-core cmake ninja && touch {venv}/.complete")
    install = run_in(root, USER, script, timeout=3000)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    ts = f"{venv}/bin/tailscope"
    machine = f"{venv}/bin/python -c 'import platform; print(platform.machine())'"
    arch = run_in(root, USER, machine, timeout=300)
    assert arch.stdout.strip() == "aarch64"

    facts = run_in(root, USER, f"{ts} facts --json", timeout=600)
    assert facts.returncode == 0, facts.stderr[-2000:]
    assert '"emulation": "emulated aarch64 on ' in facts.stdout

    arith = run_in(root, USER, f"rm -rf a && {ts} run arith --trials 1 --no-progress --campaign a",
                   timeout=900)
    assert arith.returncode == 0, arith.stdout[-3000:] + arith.stderr[-3000:]
    table = re.search(r"\bFMA\b", arith.stdout) and re.search(r"[Pp]ipelined", arith.stdout)
    assert table, arith.stdout[-2000:]

    check = run_in(root, USER, f"{ts} check --quick --trials 2 --no-progress", timeout=1800)
    assert check.returncode == 3, check.stdout[-3000:] + check.stderr[-3000:]
    assert "Traceback" not in check.stderr
    assert re.search(r"inconclusive - emulated aarch64 on ", check.stdout), check.stdout[-2000:]
    report = re.search(r"^report: (\S+)$", check.stdout, re.M)
    assert report and (root / report.group(1).lstrip("/")).is_file()

"""tailscope on aarch64 under qemu-user (issue 27): pip install in an arm64 Debian root, then check and facts.

The root (Debian's arm64 python3, gcc and the -dev libraries tailscope builds against) is made once by
scripts/debian-root with mmdebstrap and cached; its binaries run through binfmt_misc and qemu-aarch64-static.
Inside it, as an ordinary user: `pip install` of this tree (the native probes compiled by the arm64 gcc), then
`tailscope facts` says it is emulated, `tailscope run arith --trials 1` prints the arith table, and
`tailscope check --quick --trials 2` ends inconclusive (emulated), exit 3, with a report and every probe's
JSON in the store. Timings mean nothing under emulation; only the contract is checked.
"""

from __future__ import annotations

import re

import pytest

from .debian_root import copy_tree_into, debian_root, run_in

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(3600)]

ARM64 = ("python3", "python3-venv", "python3-dev", "gcc", "g++", "make", "libopenblas-dev", "libnuma-dev",
         "libhwloc-dev", "hwloc", "libpfm4-dev")  # fmt: skip
USER = "tsuser"


def test_pip_install_and_check_on_emulated_aarch64():
    root = debian_root(ARM64, arch="arm64", timeout=1800)
    tree = copy_tree_into(root, USER)
    install = run_in(root, USER, f"python3 -m venv venv && venv/bin/pip install -q {tree}", timeout=2400)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    arch = run_in(root, USER, "venv/bin/python -c 'import platform; print(platform.machine())'", timeout=120)
    assert arch.stdout.strip() == "aarch64"

    facts = run_in(root, USER, "venv/bin/tailscope facts --json", timeout=300)
    assert facts.returncode == 0, facts.stderr[-2000:]
    assert '"emulation": "emulated aarch64 on ' in facts.stdout

    arith = run_in(root, USER, "venv/bin/tailscope run arith --trials 1 --no-progress --campaign a",
                   timeout=900)
    assert arith.returncode == 0, arith.stdout[-3000:] + arith.stderr[-3000:]

    check = run_in(root, USER, "venv/bin/tailscope check --quick --trials 2 --no-progress", timeout=1800)
    assert check.returncode == 3, check.stdout[-3000:] + check.stderr[-3000:]
    assert "Traceback" not in check.stderr
    assert re.search(r"inconclusive - emulated aarch64 on ", check.stdout), check.stdout[-2000:]
    report = re.search(r"^report: (\S+)$", check.stdout, re.M)
    assert report and (root / report.group(1).lstrip("/")).is_file()

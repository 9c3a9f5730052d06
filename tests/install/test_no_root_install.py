"""`pip install` of the tree as an ordinary user without the optional system libraries (issue 26).

A minimal Debian root holds only python3, python3-venv, gcc, g++ and make: no libopenblas, libpfm4, hwloc,
libnuma or MPI. Inside it, as a user made for the test: a venv, `pip install` of this tree (CMake and Ninja
from PyPI, OpenBLAS from PyPI), then `tailscope facts` says what the build went without and what running
without root costs, and `tailscope check --trials 2` ends with a verdict (exit 0, 1 or 3) and a report.
"""

from __future__ import annotations

import json
import re

import pytest

from .debian_root import copy_tree_into, debian_root, run_in

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(3600)]

MINIMAL = ("python3", "python3-venv", "gcc", "g++", "make")
USER = "tsuser"
SITE = "venv/lib/python3.11/site-packages"


def test_pip_install_as_a_user_without_system_libraries():
    root = debian_root(MINIMAL)
    for absent in ("usr/include/perfmon", "usr/include/hwloc.h", "usr/bin/mpicc", "usr/include/numa.h"):
        assert not (root / absent).exists(), f"the minimal root must not have {absent}"
    tree = copy_tree_into(root, USER)
    install = run_in(root, USER, f"python3 -m venv venv && venv/bin/pip install -q {tree}", timeout=1500)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]

    record = json.loads((root / "home" / USER / SITE / "tailscope/_native/build.json").read_text())
    assert {"libpfm4", "mpi", "system-blas"} <= set(record["missing"]), record
    dgemm = f"{SITE}/tailscope/_native/bin/dgemm"
    linked = run_in(root, USER, f"readelf -d {dgemm}; ldd {dgemm}", timeout=60).stdout
    # the OpenBLAS wheel beside tailscope in site-packages, through $ORIGIN: never pip's build environment
    assert "$ORIGIN/../../../scipy_openblas32/lib" in linked, linked
    assert re.search(r"libscipy_openblas\.so => /home/tsuser/venv/\S+scipy_openblas32/lib/", linked), linked
    assert "pip-build-env" not in linked and "/tmp/" not in linked

    facts = run_in(root, USER, "venv/bin/tailscope facts", timeout=120)
    assert facts.returncode == 0, facts.stderr[-2000:]
    limits = [line for line in facts.stdout.splitlines() if line.startswith("limits: ")]
    assert any("built without libpfm4" in line for line in limits), limits
    assert any("built without MPI: no mpi-p2p probe" in line for line in limits), limits
    assert any("built without hwloc" in line for line in limits), limits
    assert any("not root: no physical frame numbers" in line for line in limits), limits

    check = run_in(root, USER, "venv/bin/tailscope check --trials 2 --no-progress", timeout=900)
    assert check.returncode in (0, 1, 3), check.stdout[-3000:] + check.stderr[-3000:]
    assert "Traceback" not in check.stderr
    report = re.search(r"^report: (\S+)$", check.stdout, re.M)
    assert report, check.stdout[-2000:]
    html = (root / report.group(1).lstrip("/")).read_text()
    assert "Built without libpfm4" in html and "Not root: no physical frame numbers" in html

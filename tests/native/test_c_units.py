"""The C unit tests of native/common (native/tests/*.c), built with CMake and run with CTest."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = (
    "test_cpulist",
    "test_json",
    "test_parse",
    "test_topo",
    "test_tsc",
    "test_clock",
    "test_jobenv",
    "test_counters",
    "test_arith_cycles",
)


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ctest")), reason="needs cmake and ctest")
def test_c_unit_tests(tmp_path):
    build = tmp_path / "build"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = ["cmake", "-S", str(ROOT), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release"]
    subprocess.run([*configure, "-DTAILSCOPE_BUILD_TESTS=ON"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "--target", *UNITS], check=True, capture_output=True)
    ctest = subprocess.run(
        ["ctest", "--test-dir", str(build / "native"), "--output-on-failure"], capture_output=True, text=True
    )
    assert ctest.returncode == 0, ctest.stdout + ctest.stderr
    assert f"100% tests passed, 0 tests failed out of {len(UNITS)}" in ctest.stdout

"""A real PostgreSQL 15 server for the tests that store histories in one (Debian's binaries; initdb and pg_ctl
as an unprivileged user in a temporary directory, the socket in it, no TCP): started once per test session by
the `postgres_server` fixture (tests/conftest.py); `fresh_database` gives each test a database of its own."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_BIN = Path("/usr/lib/postgresql/15/bin")
USER = "pgtest"


def as_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", USER, "--", *cmd] if os.geteuid() == 0 else cmd


@contextlib.contextmanager
def running_server() -> Iterator[tuple[str, Path]]:
    """(URL of the database `hist`, the server's socket directory)."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip("PostgreSQL 15 server binaries are not installed (Debian package postgresql-15)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", USER], check=True)
    base = Path(tempfile.mkdtemp(prefix="tailscope-pg-"))
    if os.geteuid() == 0:
        shutil.chown(base, USER, USER)
    data = base / "data"
    run = {"check": True, "capture_output": True, "timeout": 60}
    initdb = [str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"]
    subprocess.run(as_user([*initdb, "--locale=C.UTF-8"]), **run)
    options = f"-k {base} -c listen_addresses=''"  # the socket in the directory, no TCP
    pg_ctl = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "log"), "-w", "start"]
    subprocess.run(as_user(pg_ctl), **run)
    try:
        subprocess.run(as_user([str(PG_BIN / "createdb"), "-h", str(base), "-U", "postgres", "hist"]), **run)
        yield f"postgresql://postgres@/hist?host={base}", base
    finally:
        subprocess.run(as_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                       capture_output=True, timeout=60)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)


def fresh_database(server: tuple[str, Path], name: str) -> str:
    """The URL of a new, empty database `name` on the server."""
    url, base = server
    subprocess.run(as_user([str(PG_BIN / "createdb"), "-h", str(base), "-U", "postgres", name]),
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    return url.replace("/hist?", f"/{name}?")

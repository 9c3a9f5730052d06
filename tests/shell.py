"""Signals as a terminal gives them. A suite started in the background of a non-interactive shell (`make test
&`, some CI runners) inherits SIGINT ignored, and Python then keeps it ignored (its children too): a test of
what Ctrl-C does sets that up itself, here for a child (and conftest's `ctrl_c_as_from_a_shell` for this
process)."""

from __future__ import annotations

import signal


def as_from_a_shell() -> None:
    """A Popen preexec_fn: the child starts as from an interactive shell, SIGINT and SIGTERM at their defaults
    and unblocked, whatever this (long-lived) pytest process inherited or an earlier test left in it."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

"""The store's critical sections (a transaction's staging directory, its claim, its commit) hold SIGINT and
SIGTERM until they end, also while other threads of the process are alive (a store read's workers, an
evidence collector): the kernel may hand a process-directed signal to any of them."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tailscope.store.load import signals_deferred


@pytest.fixture
def another_thread():
    """A second thread of this process, alive for the test: one the kernel may hand a signal to."""
    done = threading.Event()
    thread = threading.Thread(target=done.wait, daemon=True)
    thread.start()
    yield thread
    done.set()
    thread.join()


def _section(seconds: float) -> None:
    """Python code running for a while: where a handler would run if the signal came through."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.005)


def test_a_ctrl_c_in_a_section_arrives_after_it_with_another_thread_alive(
    another_thread, ctrl_c_as_from_a_shell
):
    reached = []
    with pytest.raises(KeyboardInterrupt), signals_deferred():
        os.kill(os.getpid(), signal.SIGINT)  # to the process, as Ctrl-C is
        _section(0.2)
        reached.append("end of the section")
    assert reached == ["end of the section"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is back


def test_a_sigterm_in_a_section_reaches_the_handler_after_it_once(another_thread):
    taken = []

    def handler(signum: int, frame: object) -> None:
        taken.append((signum, inside))

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        inside = True
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            _section(0.2)
            inside = False
        _section(0.05)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert taken == [(signal.SIGTERM, False)]  # after the section, once (signals do not queue)


def test_a_quiet_section_changes_nothing():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with signals_deferred():
        pass
    assert {s: signal.getsignal(s) for s in before} == before
    assert not {signal.SIGINT, signal.SIGTERM} & signal.pthread_sigmask(signal.SIG_BLOCK, [])  # none held


def test_a_section_in_another_thread_blocks_its_own_mask():
    """Only the main thread may set handlers: a section elsewhere blocks the two signals in its own thread
    and leaves them unblocked afterwards."""
    seen = {}

    def work() -> None:
        with signals_deferred():
            seen["inside"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        seen["after"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert {signal.SIGINT, signal.SIGTERM} <= seen["inside"]
    assert not {signal.SIGINT, signal.SIGTERM} & seen["after"]

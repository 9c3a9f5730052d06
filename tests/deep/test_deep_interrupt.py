"""SIGINT during `check --deep`'s follow-up probes: exit 130 as `run` gives (the finished trials stored, no
chain judged from half of them, no deep.json), not exit 3 with a report."""

from __future__ import annotations

import os
import signal
import threading
import time

from tailscope.store.campaign import Campaign
from tailscope.verbs.deep import DeepInterrupted, run_deep


def test_sigint_during_the_follow_ups_is_an_interruption(l2sum_analyzed, ctrl_c_as_from_a_shell):
    campaign, analysis = l2sum_analyzed
    commits = len(Campaign.open(campaign).commit_records())
    claims = campaign / "claims"
    sent = threading.Event()

    def interrupt_once_the_follow_ups_run() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (claims.is_dir() and any(claims.iterdir())):
            time.sleep(0.01)
        time.sleep(0.2)
        sent.set()
        os.kill(os.getpid(), signal.SIGINT)  # delivered to the main thread, as Ctrl-C is

    threading.Thread(target=interrupt_once_the_follow_ups_run, daemon=True).start()
    try:
        run_deep(campaign, analysis, force=["dgemm"], show_progress=False)
    except DeepInterrupted as exc:
        assert exc.outcome.interrupted
    else:
        raise AssertionError(
            "the follow-ups ended before the interrupt" if sent.is_set() else "no follow-ups"
        )
    assert not (campaign / "deep.json").exists()
    assert len(Campaign.open(campaign).commit_records()) >= commits  # what was stored stays
    assert not claims.is_dir() or not any(claims.iterdir())

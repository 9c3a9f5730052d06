"""`tailscope verdict --jobs HISTORY`: NHC, drain and Prometheus from the site's own jobs, with the campaign
verdict's safety (quoted drain commands, --apply only with --drain, a node without timed jobs inconclusive
and never failed), and under real upstream NHC 1.4.3 through scripts/nhc/tailscope.nhc (`check_tailscope
--jobs`)."""

from __future__ import annotations

import pytest

from tailscope.cli import main


def test_nhc_fails_only_the_slow_node_with_its_reason(history, capsys, monkeypatch):
    root, slow, _, _ = history
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    assert main(["verdict", "--jobs", str(root), "--nhc", "--node", slow]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"ERROR:  nhc:  Health check failed:  check_tailscope:  {slow}: jobs on it ")
    assert "% slower than the same classes elsewhere" in line and "more than the 5% the settings" in line
    assert main(["verdict", "--jobs", str(root), "--nhc", "--node", "c01"]) == 0
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("SLURMD_NODENAME", slow)  # the node found as the epilog and NHC name it
    assert main(["verdict", "--jobs", str(root)]) == 1
    capsys.readouterr()
    assert main(["verdict", "--jobs", str(root), "--nhc", "--node", "login1"]) == 3
    assert "login1: inconclusive: no timed job ran on it" in capsys.readouterr().err
    assert main(["verdict", "--jobs", str(root), "--nhc", "--node", slow, "--threshold", "0.3"]) == 0


def test_drain_and_prometheus(history, tmp_path, capsys):
    root, slow, _, _ = history
    prom = tmp_path / "jobs.prom"
    assert main(["verdict", "--jobs", str(root), "--drain", "--prometheus", str(prom)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"scontrol update nodename={slow} state=drain 'reason=tailscope: jobs on it ")
    assert f'tailscope_jobs_node_degraded{{node="{slow}"}} 1' in prom.read_text()
    assert main(["verdict", "--jobs", str(root), "--apply"]) == 2
    assert "--apply runs the drain commands: use it with --drain" in capsys.readouterr().err
    assert main(["verdict", str(tmp_path), "--jobs", str(root)]) == 2
    assert "give a CAMPAIGN or --jobs HISTORY, not both" in capsys.readouterr().err
    assert main(["verdict"]) == 2
    assert "give a CAMPAIGN directory (or --jobs HISTORY" in capsys.readouterr().err


@pytest.mark.root
@pytest.mark.slow
def test_real_nhc_drains_the_slow_node_and_passes_the_others(history, tmp_path):
    from cluster.test_nhc_check import run_nhc  # skips without root, unshare or upstream NHC

    root, slow, _, _ = history
    conf = [f"* || check_tailscope --jobs {root}"]
    rc, out, _ = run_nhc(tmp_path, conf, hostname="c01", nhc_args=("-t", "60"))
    assert rc == 0 and "Health check failed" not in out, out
    rc, out, _ = run_nhc(tmp_path, conf, hostname=f"{slow}.cluster.local", nhc_args=("-t", "60"))
    assert rc != 0 and f"check_tailscope:  {slow}: jobs on it " in out, out
    rc, out, _ = run_nhc(tmp_path, conf, hostname="login1", nhc_args=("-t", "60"))
    assert rc == 0 and "check_tailscope:  inconclusive; node not failed: " in out, out
    assert "login1: inconclusive: no timed job ran on it" in out, out

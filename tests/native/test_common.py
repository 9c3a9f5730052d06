"""What every probe shares: usage errors, --check-args, --help, --cpus, the clock fields of the config."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe_runs import CONFIG_KEYS, PROBES, online_cpus

# Cheap arguments per probe, for runs that go all the way.
QUICK = {
    "l2sum": ("--sums", "20"),
    "stream": ("--elements", "200000", "--reps", "2"),
    "dgemm": ("--n", "128", "--calls", "2"),
    "hpl": ("--n", "128"),
    "fwq": ("--samples", "20", "--work", "1000"),
    "latency": ("--sizes", "16k,256k", "--iterations", "3", "--clock-chunks", "5"),
    "arith": ("--ops", "512", "--iterations", "3", "--clock-chunks", "5"),
    "c2c": ("--round-trips", "100", "--iterations", "3"),
}


def absent_cpu() -> int:
    possible = Path("/sys/devices/system/cpu/possible").read_text().strip()
    return int(possible.split(",")[-1].split("-")[-1]) + 1


@pytest.mark.parametrize("name", PROBES)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--frobnicate",), "--frobnicate: unknown option (see {name} --help)"),
        (("--seed", "x1"), "--seed x1: expected a non-negative integer"),
        (("--cpus", "0-"), "--cpus 0-: expected a CPU number"),
        (("--cpus", "CPU"), "--cpus CPU: expected a CPU number"),
        (("--page", "3m"), "--page 3m: expected 4k, thp, 2m or 1g"),
        (("--offset", "100"), "--offset 100: must be a multiple of 64"),
        (("--offset", "1q"), "--offset 1q: expected a byte count"),
        (("--page",), "--page: needs a value"),
        (("stray",), "stray: unexpected argument"),
    ],
)
def test_usage_errors(probe, name, args, message):
    run = probe(name, *args, expect=2)
    assert run.stdout == ""  # rejected before anything is measured or printed
    assert run.stderr.startswith(f"{name}: error: {message.format(name=name)}")


@pytest.mark.parametrize("name", PROBES)
def test_cpu_that_does_not_exist(probe, name):
    cpu = absent_cpu()
    online = online_cpus()
    run = probe(name, "--cpus", f"0,{cpu}", expect=2)
    assert f"{name}: error: --cpus 0,{cpu}: CPU {cpu} does not exist (online CPUs: " in run.stderr
    if online == list(range(len(online))):
        assert f"(online CPUs: {0 if len(online) == 1 else f'0-{len(online) - 1}'})" in run.stderr


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("l2sum", ("--sums", "0"), "--sums 0: must be between 1 and"),
        ("l2sum", ("--l2-fraction", "abc"), "--l2-fraction abc: expected a number"),
        ("stream", ("--elements", "1e6"), "--elements 1e6: expected an integer"),
        ("stream", ("--max-bytes", "lots"), "--max-bytes lots: expected a byte count"),
        ("dgemm", ("--calls", "1"), "--calls 1: must be between 2 and"),
        ("dgemm", ("--n", "-5"), "--n -5: must be between 1 and"),
        ("fwq", ("--quantum-us", "0"), "--quantum-us 0: must be between 0.01 and"),
        ("fwq", ("--samples", "10", "--work"), "--work: needs a value"),
    ],
)
def test_probe_option_errors(probe, name, args, message):
    assert probe(name, *args, expect=2).stderr.startswith(f"{name}: error: {message}")


@pytest.mark.parametrize("name", PROBES)
def test_check_args_prints_only_the_config(probe, name):
    run = probe(name, "--check-args", "--cpus", "all", "--page", "4k", "--offset", "4k", "--seed", "5")
    assert [r["record"] for r in run.records] == ["config"]
    config = run.config
    for key in CONFIG_KEYS:
        assert key in config, key
    cpus = online_cpus()
    assert config["cpus"] == cpus and config["threads_requested"] == len(cpus) == config["threads"]
    assert config["page_policy"] == "4k" and config["page_size"] == 4096 and config["offset"] == 4096
    assert config["params"]["seed"] == 5 and config["params"]["cpus_spec"] == "all"
    # the timer: TSC frequency source, tick, overhead (min of 10 pairs) in cycles and ns agree
    assert config["tsc_hz_source"] in ("cpuid15", "calibrated", "cntfrq")
    assert config["timer_resolution_ns"] == pytest.approx(1e9 / config["tsc_hz"], rel=1e-12)
    assert config["timer_overhead_ns"] == pytest.approx(
        config["timer_overhead_cycles"] / config["tsc_hz"] * 1e9, rel=1e-12
    )
    assert config["timer_overhead_cycles"] >= 1
    assert config["params"]["mono_from_tsc"] is True


@pytest.mark.parametrize("name", PROBES)
def test_help_is_the_manual(probe, name):
    run = probe(name, "--help", text_output=True)
    source = (Path(__file__).parents[2] / "native" / "probes" / f"{name}.c").read_text()
    first = source.split("\n")[1].removeprefix(" * ")
    assert run.stdout.splitlines()[0] == first  # the header comment's first line
    for option in (
        "--cpus",
        "--page",
        "--offset",
        "--no-pages",
        "--seed",
        "--check-args",
        "OPTIONS",
        "OUTPUT",
    ):
        assert option in run.stdout


@pytest.mark.parametrize("name", PROBES)
def test_single_cpu_and_list_order(probe, name):
    cpus = online_cpus()
    spec = ",".join(str(c) for c in reversed(cpus[:2]))
    run = probe(name, *QUICK[name], "--cpus", spec, "--no-pages")
    assert run.config["cpus"] == list(reversed(cpus[:2]))
    threads = [r for r in run.of("iteration") if r["thread"] is not None]
    if name not in ("dgemm", "hpl"):  # BLAS probes: records of the calling thread, on any CPU of the set
        assert all(r["cpu"] == run.config["cpus"][r["thread"]] for r in threads)
    assert run.of("validation")[0]["passed"] is True


DEFAULTS = {
    "l2sum": {"l2_fraction": 0.95, "sums": 1000, "sums_per_iteration": 10, "iterations": 100},
    "stream": {"reps": 10, "stores": "nt", "max_bytes": 1 << 30},
    "dgemm": {"n": 2000, "calls": 10, "blas_coretype_policy": "auto"},
    "hpl": {"n": 2000, "iterations": 1, "warmup_iterations": 1, "blas_coretype_policy": "auto"},
    "fwq": {"samples": 5000, "quantum_us": 100, "work_calibrated": True},
    "latency": {"loads": 65536, "iterations": 21, "sweep": 0, "max_bytes": 1 << 30, "clock_chunks": 100},
    "arith": {"ops": 16384, "iterations": 31, "chains_throughput": 12, "clock_chunks": 10},
    "c2c": {"round_trips": 1000, "iterations": 15, "pairs_requested": 0},
}


@pytest.mark.parametrize("name", PROBES)
def test_defaults_measure_and_validate(probe, name):
    """A run with every default, as `tailscope run` starts it without options."""
    run = probe(name)
    for key, value in DEFAULTS[name].items():
        assert run.params[key] == value, key
    assert run.config["params"]["cpus_spec"] == "cores" and run.config["page_policy"] == "thp"
    assert run.of("validation")[0]["passed"] is True
    assert run.result["value"] > 0

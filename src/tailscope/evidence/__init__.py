"""Evidence on every trial: what else happened on the probe's CPUs while it ran (the contract: EVIDENCE.md
at the repository root and docs/evidence.md).

Read around each trial process by the local runner, from /proc and /sys only (no PMU, no root needed):
per-CPU time (/proc/stat, cpuidle residency), interrupts, node-wide /proc/vmstat, cpufreq and thermal
throttling where present, the probe threads' scheduler statistics, the processes that ran on the probe's
CPUs (`corunners`), and the effective clock and availability of each probe CPU (native/common/ts_clock.c).
The rows go to the `counters` table with source `os` and to the `corunners` table.
"""

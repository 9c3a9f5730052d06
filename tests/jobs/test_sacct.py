"""sacct's -P output read strictly: the format verified on this machine's Slurm 22.05 (header `CPUTimeRAW`,
hostlist-compressed NodeList, `None assigned`, an empty Account, FAILED/CANCELLED by N, step rows), the
requeued job as its last run, a `|` inside a job name, and every malformed field as one line naming the file,
the line and the field."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tailscope.jobs.sacct import SacctError, parse

# `sacct -P -X -o JobID,JobName,User,Account,Partition,NodeList,NNodes,NCPUS,AllocCPUS,Elapsed,ElapsedRaw,
# Submit,Start,End,State,ExitCode,DerivedExitCode,WorkDir,SubmitLine,Cluster,TotalCPU,CPUTimeRaw` as 22.05.8
# printed it here (../shared/notes/facts-slurm-accounting.md), plus rows of the other shapes sacct writes.
HEADER = (
    "JobID|JobName|User|Account|Partition|NodeList|NNodes|NCPUS|AllocCPUS|Elapsed|ElapsedRaw|Submit|Start|End|"
    "State|ExitCode|DerivedExitCode|WorkDir|SubmitLine|Cluster|TotalCPU|CPUTimeRAW"
)
ROWS = [
    "1|sleep1|root|root|debug|n1|1|1|1|00:00:01|1|2026-11-28T20:15:07|2026-11-28T20:15:08|2026-11-28T20:15:09|"
    "COMPLETED|0:0|0:0|/tmp/slurmacct/jobs|sbatch -Q -J sleep1 -o /tmp/slurmacct/jobs/%j.out --wrap sleep 1|"
    "tailscope-test|00:00:00|1",
    "16|multi|root|root|debug|n[1-3]|3|3|3|00:00:01|1|2026-11-28T20:16:07|2026-11-28T20:16:08|"
    "2026-11-28T20:16:09|COMPLETED|0:0|0:0|/tmp/slurmacct/jobs|sbatch -Q -J multi -N 3 --wrap srun hostname; "
    "sleep 1|tailscope-test|00:00:00|3",
    "17|multi-batchonly|root|root|debug|n[1,3]|2|2|2|00:00:02|2|2026-11-28T20:17:07|2026-11-28T20:17:08|"
    "2026-11-28T20:17:10|COMPLETED|0:0|0:0|/tmp|sbatch -N 2 --wrap x|tailscope-test|00:00:00|4",
    "18|fails|root|root|debug|n2|1|1|1|00:00:00|0|2026-11-28T20:18:07|2026-11-28T20:18:08|2026-11-28T20:18:08|"
    "FAILED|3:0|0:0|/tmp|sbatch --wrap exit 3|tailscope-test|00:00:00|0",
    "20|as-nobody|nobody||debug|n1|1|1|1|00:00:01|1|2026-11-28T20:20:07|2026-11-28T20:20:08|2026-11-28T20:20:09|"
    "COMPLETED|0:0|0:0|/tmp|sbatch --wrap x|tailscope-test|00:00:00|1",
    "21|gone|root|root|debug|None assigned|0|1|0|00:00:00|0|2026-11-28T20:21:07|Unknown|2026-11-28T20:21:30|"
    "CANCELLED by 0|0:0|0:0|/tmp|sbatch --wrap x|tailscope-test|00:00:00|0",
    "21.batch|batch||root||n1|1|1|1|00:00:01|1|2026-11-28T20:20:08|2026-11-28T20:20:08|2026-11-28T20:20:09|"
    "COMPLETED|0:0||||tailscope-test|00:00:00|1",
    "22|running|root|root|debug|n3|1|1|1|00:00:05|5|2026-11-28T20:22:07|2026-11-28T20:22:08|Unknown|RUNNING|0:0|"
    "0:0|/tmp|sbatch --wrap x|tailscope-test|00:00:00|5",
    "23_4|array|root|root|debug|n2|1|1|1|00:00:03|3|2026-11-28T20:23:07|2026-11-28T20:23:08|2026-11-28T20:23:11|"
    "TIMEOUT|0:15|0:0|/tmp|sbatch -a 4 --wrap x|tailscope-test|00:00:00|3",
]


def dump(tmp_path, lines, name="sacct.txt"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_format_sacct_writes_is_read_field_by_field(tmp_path):
    parsed = parse(dump(tmp_path, [HEADER, *ROWS]), zone=dt.UTC)
    rows = {r["job_id"]: r for r in parsed.rows}
    assert sorted(rows) == ["1", "16", "17", "18", "20", "21", "23_4"]
    assert parsed.steps == 1 and parsed.unfinished == 1
    assert rows["16"]["nodelist"] == "n[1-3]" and rows["16"]["nnodes"] == 3 and rows["16"]["cpus"] == 3
    assert rows["17"]["elapsed_s"] == 2.0
    assert rows["17"]["start_at"] == dt.datetime(2026, 11, 28, 20, 17, 8, tzinfo=dt.UTC)
    assert rows["18"]["state"] == "FAILED" and rows["18"]["exit_code"] == "3:0"
    assert rows["20"]["account"] is None and rows["20"]["user_name"] == "nobody"
    assert (
        rows["21"]["state"] == "CANCELLED" and rows["21"]["nodelist"] == "" and rows["21"]["start_at"] is None
    )
    assert rows["23_4"]["state"] == "TIMEOUT"
    assert all(r["cluster"] == "tailscope-test" for r in parsed.rows)


def test_times_without_a_zone_are_local_unless_told(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    import time

    time.tzset()
    try:
        rows = parse(dump(tmp_path, [HEADER, ROWS[0]])).rows
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert rows[0]["end_at"] == dt.datetime(2026, 11, 29, 1, 15, 9, tzinfo=dt.UTC)  # EST is UTC-5 in November


def test_a_requeued_job_is_its_last_run_and_steps_and_trailing_bars_are_fine(tmp_path):
    header = "JobID|JobName|User|Partition|NodeList|NNodes|NCPUS|Elapsed|Start|End|State|"  # -p: '|' ends it
    lines = [
        header,
        "7|app|u|p|n1|1|4|00:10:00|2026-11-01T00:00:00|2026-11-01T00:10:00|REQUEUED|",
        "7|app|u|p|n2|1|4|1-00:00:02|2026-11-01T01:00:00|2026-11-02T01:00:02|COMPLETED|",
        "7.batch|batch|u|p|n2|1|4|00:00:02|2026-11-01T01:00:00|2026-11-01T01:00:02|COMPLETED|",
    ]
    parsed = parse(dump(tmp_path, lines), zone=dt.UTC)
    assert len(parsed.rows) == 1 and parsed.duplicates == 1
    row = parsed.rows[0]
    assert row["nodelist"] == "n2" and row["elapsed_s"] == 86402.0 and row["state"] == "COMPLETED"
    assert row["cluster"] == ""


def test_a_bar_inside_the_one_free_text_column_is_joined_back(tmp_path):
    header = "JobID|JobName|User|Partition|NodeList|NNodes|AllocCPUS|ElapsedRaw|Start|End|State"
    line = "9|a|b|c|u|p|n1|1|4|60|2026-11-01T00:00:00|2026-11-01T00:01:00|COMPLETED"
    assert parse(dump(tmp_path, [header, line]), zone=dt.UTC).rows[0]["name"] == "a|b|c"
    two_free = header + "|Comment"
    with pytest.raises(SacctError, match=r"sacct.txt:2: 14 fields, the header has 12"):
        parse(dump(tmp_path, [two_free, line + "|x"]), zone=dt.UTC)


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [
        (0, "12x", "JobID: expected a Slurm job id"),
        (14, "DONE?", "State: expected a Slurm state"),
        (5, "n[1-", "NodeList: hostlist 'n[1-': '[' not closed"),
        (5, "n[0-999999999]", "more than 100,000 names"),
        (6, "three", "NNodes: expected a whole number"),
        (10, "-5", "ElapsedRaw: expected a whole number"),
        (13, "2026-13-45T99:00:00", "End: expected a real date and time"),
        (13, "yesterday", "End: expected a time like"),
        (15, "0", "ExitCode: expected code:signal"),
    ],
)
def test_a_bad_field_is_one_line_naming_file_line_and_field(tmp_path, column, value, expected):
    fields = ROWS[1].split("|")
    fields[column] = value
    path = dump(tmp_path, [HEADER, ROWS[0], "|".join(fields)])
    with pytest.raises(SacctError) as err:
        parse(path, zone=dt.UTC)
    text = str(err.value)
    assert text.startswith(f"{path}:3: ") and expected in text and "\n" not in text


def test_a_file_that_is_not_a_sacct_dump_says_what_it_needs(tmp_path):
    with pytest.raises(SacctError, match="empty"):
        parse(dump(tmp_path, []).with_name("sacct.txt").write_text("") or tmp_path / "sacct.txt")
    with pytest.raises(SacctError, match=r":1: the header names no JobID, NodeList.*ElapsedRaw"):
        parse(dump(tmp_path, ["JobName|User|Partition|NNodes|Start|End|State|AllocCPUS", "x"]))
    big = tmp_path / "big.txt"
    big.write_bytes(HEADER.encode() + b"\n" + b"x" * (1 << 21))
    with pytest.raises(SacctError, match="more than 1048576 bytes"):
        parse(big)


def test_a_real_sites_dump_is_read_without_error(tmp_path, monkeypatch, capsys):
    """UB CCR's ub-hpc records as Open XDMoD keeps them for its Slurm shredder's tests (data/SOURCES.md)."""
    from tailscope.cli import main
    from tailscope.hostlist import expand
    from tailscope.jobs.store import open_jobs

    dump = Path(__file__).parent / "data" / "xdmod-ub-hpc-sacct.txt"
    parsed = parse(dump, zone=dt.UTC)
    rows = {r["job_id"]: r for r in parsed.rows}
    assert sorted(rows) == ["4103947", "4107166", "4107219", "5692623"] and parsed.unfinished == 0
    big = rows["4103947"]
    assert big["state"] == "TIMEOUT" and big["elapsed_s"] == 3 * 86400 and big["cpus"] == 256
    assert len(expand(big["nodelist"])) == big["nnodes"] == 32
    assert (
        rows["4107166"]["state"] == "CANCELLED"
        and rows["4107166"]["elapsed_s"] == 2 * 86400 + 22 * 3600 + 184
    )
    assert rows["4107219"]["end_at"] == dt.datetime(2015, 7, 1, 2, 4, 53, tzinfo=dt.UTC)
    assert rows["5692623"]["partition"] == "" and rows["5692623"]["cluster"] == "ub-hpc"
    monkeypatch.setenv("TZ", "UTC")  # XDMoD's dumps are written with TZ=UTC
    history = tmp_path / "H"
    assert main(["jobs", "collect", str(history), "--sacct-file", str(dump)]) == 0
    assert "4 jobs added" in capsys.readouterr().out
    jobs, damaged = open_jobs(history).read_jobs()
    assert damaged == [] and len(jobs) == 4
    assert main(["jobs", "show", str(history)]) == 3  # four jobs of four classes: nothing to judge, said so
    assert "no class has 10 completed jobs yet" in capsys.readouterr().out.splitlines()[0]


D = "\x1f#(~.\x1f"  # a delimiter of a dump's own (`sacct -P --delimiter=...`): no user text holds it


def test_a_dump_with_a_delimiter_of_its_own_reads_any_name_and_comment(tmp_path):
    """Slurm keeps a job name or comment as given and sacct prints it raw: '|', line breaks, control
    characters. With a delimiter no text holds, each is read back exactly, and a name that holds a whole
    forged record (a line break, then fields of a job that never ran) stays the name of its own job."""
    header = "JobID|JobName|User|Partition|NodeList|NNodes|AllocCPUS|ElapsedRaw|Start|End|State|Comment"
    header = header.split("|")
    forged = "x\n999|fake|root|debug|n9|1|1|1|2026-11-01T00:00:00|2026-11-01T00:00:01|COMPLETED|"
    names = ["a|b", forged, "tab\there\x1b[31mred", "", "w" * 5000]
    comments = ["tailscope:lmp|x", "two\nlines\n\nand a blank", "ends with a break\n", "", "c"]
    lines = [D.join(header)]
    for i, (name, comment) in enumerate(zip(names, comments, strict=True)):
        lines.append(D.join([str(i + 1), name, "u", "p", f"n{i + 1}", "1", "4", "60", "2026-11-01T00:00:00",
                             "2026-11-01T00:01:00", "COMPLETED", comment]))  # fmt: skip
    path = tmp_path / "dump.txt"
    path.write_text("\n".join(lines) + "\n")
    parsed = parse(path, zone=dt.UTC)
    assert [r["job_id"] for r in parsed.rows] == ["1", "2", "3", "4", "5"]
    got = {r["job_id"]: r for r in parsed.rows}
    assert [got[str(i + 1)]["name"] for i in range(4)] == names[:4]
    assert got["5"]["name"] == "w" * 4093 + "..."  # a user's text is cut, never refused
    assert [got[str(i + 1)]["comment"] for i in range(3)] == comments[:3]  # line breaks and all
    assert all(r["nodelist"] == f"n{r['job_id']}" for r in parsed.rows)


def test_a_dump_with_bars_refuses_a_line_break_it_cannot_place(tmp_path):
    header = "JobID|JobName|User|Partition|NodeList|NNodes|AllocCPUS|ElapsedRaw|Start|End|State|Comment"
    row = "1|x\ny|u|p|n1|1|4|60|2026-11-01T00:00:00|2026-11-01T00:01:00|COMPLETED|"
    with pytest.raises(SacctError) as err:
        parse(dump(tmp_path, [header, row]), zone=dt.UTC)
    text = str(err.value)
    assert ":2: 2 fields, the header has 12" in text and "--delimiter" in text and "\n" not in text
    wrong = tmp_path / "wrong.txt"
    wrong.write_text(f"JobID{D}JobName|User\n")
    with pytest.raises(SacctError, match=r":1: the header's names are not all separated by"):
        parse(wrong)
    short = tmp_path / "short.txt"
    short.write_text(D.join(header.split("|")) + "\n" + D.join(row.split("|")[:5]) + "\n")
    with pytest.raises(SacctError, match=r":2: 5 fields, the header has 12 \(the file ends inside a rec"):
        parse(short)


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_a_sacct_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    import os

    path = tmp_path / "dump"
    if kind == "fifo":
        os.mkfifo(path)  # no writer: an open that waited would hang
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path("/dev/zero")  # read for ever by a plain open
    with pytest.raises(SacctError) as err:
        parse(path)
    assert str(err.value).startswith(f"{path}: ") and "not a regular file" in str(err.value)

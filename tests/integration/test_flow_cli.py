"""Flow control from the command line (docs/flow-control.md): `duetime queues pause|resume|set
|list`, `duetime tenants set|list`, and an enqueue past a max backlog (exit 1, one line)."""

from __future__ import annotations

import json

from integration.procs import describe, run_cli


def cli(db_url: str, *args: str) -> tuple[int, str, str]:
    done = run_cli([*args, "--database-url", db_url])
    return done.returncode, done.stdout, done.stderr


def test_queues_pause_resume_set_and_list(db_url: str) -> None:
    code, out, _ = cli(db_url, "queues", "set", "mail", "--concurrency", "3", "--weight", "2")
    assert code == 0 and out.strip() == (
        "queue mail: active, dispatch direct, concurrency 3, max backlog -, weight 2"
    )
    code, out, _ = cli(db_url, "queues", "pause", "mail")
    assert code == 0 and out.startswith("queue mail: paused,")
    code, out, _ = cli(db_url, "enqueue", "t", "--queue", "mail")
    assert code == 0, out  # a paused queue accepts jobs
    code, out, _ = cli(db_url, "queues", "list", "--json")
    [row] = json.loads(out)
    assert (row["queue"], row["paused"], row["concurrency"], row["weight"]) == ("mail", True, 3, 2)
    assert (row["backlog"], row["running"], row["waiting"]) == (1, 0, 1)  # due, not started
    assert 0 <= row["waiting_seconds"] < 60
    code, out, _ = cli(db_url, "queues", "list")
    assert code == 0 and "paused" in out.splitlines()[1]
    assert " running  waiting  waited  outbox backlog " in out.splitlines()[0], out
    code, out, _ = cli(db_url, "queues", "resume", "mail", "--json")
    assert code == 0 and json.loads(out)["paused"] is False
    code, out, _ = cli(db_url, "queues", "set", "mail", "--concurrency", "none", "--json")
    assert json.loads(out)["concurrency"] is None


def test_bad_values_and_nothing_to_set_are_usage_errors(db_url: str) -> None:
    for args in (
        ["queues", "set", "mail", "--concurrency", "-2"],
        ["queues", "set", "mail", "--max-backlog", "many"],
        ["queues", "set", "mail", "--weight", "0"],
        ["queues", "set", "mail"],
        ["tenants", "set", "acme"],
        ["tenants", "set", "acme", "--concurrency", "1.5"],
    ):
        done = run_cli([*args, "--database-url", db_url])
        assert done.returncode == 2, describe(done)
        assert done.stderr.strip().splitlines()[-1].startswith("duetime "), describe(done)


def test_tenants_set_and_list(db_url: str) -> None:
    code, out, _ = cli(db_url, "tenants", "set", "acme", "--concurrency", "5", "--max-backlog", "9")
    assert code == 0 and out.strip() == "tenant acme: concurrency 5, max backlog 9, weight 1"
    cli(db_url, "enqueue", "t", "--tenant", "acme")
    assert cli(db_url, "enqueue", "t", "--tenant", "acme", "--in", "1h")[0] == 0  # not due yet
    code, out, _ = cli(db_url, "tenants", "list", "--json")
    rows = {r["tenant"]: r for r in json.loads(out)}
    assert (rows["acme"]["concurrency"], rows["acme"]["backlog"]) == (5, 2)
    assert (rows["acme"]["running"], rows["acme"]["waiting"]) == (0, 1)
    assert 0 <= rows["acme"]["waiting_seconds"] < 60
    code, out, _ = cli(db_url, "tenants", "list")
    assert code == 0 and out.splitlines()[0].split()[:2] == ["tenant", "concurrency"]
    header = out.splitlines()[0].split()
    assert header[header.index("running") :][:3] == ["running", "waiting", "waited"], out
    [acme] = [x.split() for x in out.splitlines() if x.startswith("acme ")]
    assert acme[header.index("waiting") - 1] == "1" and acme[header.index("waited") - 1].endswith(
        "s"
    ), out  # "max backlog" is one column of two words


def test_an_enqueue_past_max_backlog_exits_1_with_one_line(db_url: str) -> None:
    cli(db_url, "queues", "set", "mail", "--max-backlog", "1")
    assert cli(db_url, "enqueue", "t", "--queue", "mail")[0] == 0
    code, out, err = cli(db_url, "enqueue", "t", "--queue", "mail")
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "max backlog of 1" in err and "nothing was enqueued" in err
    code, out, _ = cli(db_url, "queues", "list", "--json")
    assert json.loads(out)[0]["backlog"] == 1  # nothing stored


def test_stats_show_controlled_queues_and_tenants(db_url: str) -> None:
    cli(db_url, "enqueue", "t", "--queue", "mail")
    code, out, _ = cli(db_url, "stats")
    assert code == 0 and "paused" not in out and "max backlog" not in out  # none: as before
    cli(db_url, "queues", "pause", "mail")
    cli(db_url, "tenants", "set", "default", "--concurrency", "4")
    code, out, _ = cli(db_url, "stats")
    lines = out.splitlines()
    header = next(x for x in lines if x.startswith("queue "))
    assert header.split()[2:6] == ["backlog", "running", "waiting", "waited"], out
    mail = lines[lines.index(header) + 1].split()
    assert mail[:5] == ["mail", "paused", "1", "0", "1"], out  # due, not started: waiting
    assert mail[5].endswith("s") and mail[6:] == ["-", "-", "1"], out
    assert any(
        x.split()[:4] == ["default", "1", "0", "1"] and x.split()[5:7] == ["4", "-"] for x in lines
    ), out
    code, out, _ = cli(db_url, "stats", "--json")
    flow = json.loads(out)["flow"]
    assert flow["queues"][0]["paused"] is True and flow["tenants"][0]["concurrency"] == 4
    assert (flow["queues"][0]["waiting"], flow["tenants"][0]["waiting"]) == (1, 1)
    assert 0 <= flow["queues"][0]["waiting_seconds"] < 60

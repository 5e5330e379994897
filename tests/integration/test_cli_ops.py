"""Operator commands of the CLI as a public contract, run as real subprocesses on each store:
`duetime tokens ...`, `duetime stats`, `duetime dlq list|replay`, `duetime enqueue --from-file`,
the due filters and cursor of `duetime jobs list`, and `duetime schedules backfill` in chunks.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from duetime import App, ErrorCategory
from duetime.admin.tokens import authenticate
from duetime.cli.backfill import backfill_chunks
from duetime.cli.support import Progress
from duetime.core.clock import ManualClock
from duetime.core.models import Outcome
from duetime.core.states import Event
from integration.procs import DUETIME, base_env, query, scalar

BAR_DONE = "[####################]"

# -- helpers ------------------------------------------------------------------------------------


def cli(url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`duetime ARGS... --database-url URL`, stdin a pipe (never a terminal) holding `stdin`."""
    return subprocess.run(
        [str(DUETIME), *args, "--database-url", url],
        input=stdin,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def describe(done: subprocess.CompletedProcess[str]) -> str:
    return (
        f"`{' '.join(map(str, done.args))}` exited {done.returncode}\n"
        f"stdout: {done.stdout!r}\nstderr: {done.stderr!r}"
    )


def ok(done: subprocess.CompletedProcess[str], stderr: str = "") -> str:
    """Exit 0 with exactly `stderr` on stderr; returns stdout."""
    assert done.returncode == 0, describe(done)
    assert done.stderr == stderr, describe(done)
    return done.stdout


def as_json(done: subprocess.CompletedProcess[str], code: int = 0) -> Any:
    assert done.returncode == code, describe(done)
    assert done.stderr == "", describe(done)
    return json.loads(done.stdout)


def failed(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 1, nothing on stdout, one stderr line `duetime: error: ...` naming `fragments`."""
    assert done.returncode == 1, describe(done)
    assert done.stdout == "", describe(done)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("duetime: error: "), describe(done)
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in the message\n{describe(done)}"
    return lines[0]


def usage_error(done: subprocess.CompletedProcess[str], fragment: str = "") -> None:
    assert done.returncode == 2, describe(done)
    assert done.stdout == "" and "usage: duetime" in done.stderr, describe(done)
    assert fragment in done.stderr, describe(done)


def count_jobs(url: str) -> int:
    return int(scalar(url, "SELECT count(*) FROM duetime_all_jobs"))


@pytest.fixture
def ops(db_url: str) -> Iterator[App]:
    """A plain App (no registered tasks) on the test database."""
    app = App(db_url)
    yield app
    app.close()


def make_dead(app: App, task: str, queue: str, count: int) -> list[int]:
    """`count` dead jobs of `task` in `queue`, each failed once with "boom <id>"."""
    ids = [app.enqueue(task, {"n": n}, queue=queue, max_attempts=1).id for n in range(count)]
    claims = app.store.claim(worker_id="test", queues=[queue], limit=count, now=app.clock.now())
    assert sorted(c.job.id for c in claims) == ids
    for claim in claims:
        outcome = Outcome(
            Event.GIVE_UP,
            error_category=ErrorCategory.PERMANENT,
            error_message=f"boom {claim.job.id}",
        )
        assert app.store.finish(claim.lease, outcome, app.clock.now())
    return ids


# -- tokens -------------------------------------------------------------------------------------


def test_tokens_create_list_revoke(db_url: str, ops: App) -> None:
    usage_error(cli(db_url, "tokens", "create"), "--role")
    usage_error(cli(db_url, "tokens", "create", "--role", "root"), "invalid choice")

    text = ok(
        cli(db_url, "tokens", "create", "--tenant", "acme", "--role", "write", "--name", "ci")
    )
    fields = dict(line.split(None, 1) for line in text.split("\n\n")[0].splitlines())
    secret = fields["secret"]
    assert secret.startswith("dt_") and len(secret) > 40, text
    assert (fields["tenant"], fields["role"], fields["name"]) == ("acme", "write", "ci"), text
    assert "cannot be shown again" in text, text
    acme_id = int(fields["id"])

    created = as_json(cli(db_url, "tokens", "create", "--role", "read", "--json"))
    assert (created["tenant"], created["role"]) == ("default", "read"), created
    assert created["secret"].startswith("dt_") and created["secret"] != secret

    # only the hash is stored: the secret is nowhere in the table, and is never listed again
    rows = query(db_url, "SELECT * FROM duetime_tokens ORDER BY id")
    assert len(rows) == 2
    assert not any(secret in str(cell) for row in rows for cell in row), rows
    stored = scalar(db_url, "SELECT secret_hash FROM duetime_tokens WHERE id = ?", (acme_id,))
    assert stored == hashlib.sha256(secret.encode()).hexdigest() != secret
    listed = as_json(cli(db_url, "tokens", "list", "--tenant", "acme", "--json"))
    assert [(t["id"], t["role"], t["name"]) for t in listed] == [(acme_id, "write", "ci")]
    assert listed[0]["prefix"] == secret[:10] and listed[0]["revoked_at"] is None
    assert "secret" not in listed[0] and secret not in json.dumps(listed)
    assert [t["tenant"] for t in as_json(cli(db_url, "tokens", "list", "--all", "--json"))] == [
        "acme",
        "default",
    ]
    table = ok(cli(db_url, "tokens", "list")).splitlines()
    assert table[0].split()[:4] == ["id", "tenant", "role", "name"], table
    assert len(table) == 2 and table[1].split()[1:3] == ["default", "read"], table
    assert created["secret"] not in "\n".join(table)

    assert authenticate(ops, secret) is not None
    revoked = ok(cli(db_url, "tokens", "revoke", str(acme_id)))
    assert revoked.startswith(f"revoked token {acme_id} (tenant acme"), revoked
    assert "already revoked" in ok(cli(db_url, "tokens", "revoke", str(acme_id)))
    assert authenticate(ops, secret) is None, "a revoked token must not authenticate"
    assert authenticate(ops, created["secret"]) is not None, "revoke only that token"
    [after] = as_json(cli(db_url, "tokens", "list", "--tenant", "acme", "--json"))
    assert after["revoked_at"] is not None
    failed(cli(db_url, "tokens", "revoke", "999999"), "token 999999 does not exist")


def test_tokens_can_expire(db_url: str, ops: App) -> None:
    usage_error(cli(db_url, "tokens", "create", "--role", "read", "--expires-in", "soon"))
    usage_error(cli(db_url, "tokens", "create", "--role", "read", "--expires-in", "0s"), "than 0")
    before = datetime.now(UTC)
    created = as_json(
        cli(db_url, "tokens", "create", "--role", "read", "--expires-in", "30d", "--json")
    )
    expires = datetime.fromisoformat(created["expires_at"])
    assert before + timedelta(days=30) <= expires <= datetime.now(UTC) + timedelta(days=30)
    text = ok(cli(db_url, "tokens", "create", "--role", "read", "--expires-in", "12h"))
    assert re.search(r"^expires +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", text, re.M), text
    forever = as_json(cli(db_url, "tokens", "create", "--role", "read", "--json"))
    assert forever["expires_at"] is None
    listed = {t["id"]: t for t in as_json(cli(db_url, "tokens", "list", "--json"))}
    assert listed[created["id"]]["expires_at"] == created["expires_at"]
    assert listed[created["id"]]["state"] == "active"
    table = ok(cli(db_url, "tokens", "list")).splitlines()
    assert "expires" in table[0].split(), table
    assert "never" in table[-1].split() and expires.strftime("%Y-%m-%d") in table[1], table
    assert authenticate(ops, created["secret"]) is not None
    later = App(db_url, clock=ManualClock(expires))
    try:
        assert authenticate(later, created["secret"]) is None, "an expired token is refused"
        [token] = [t for t in later.list_tokens() if t.id == created["id"]]
        assert token.state(later.clock.now()) == "expired"
    finally:
        later.close()


# -- stats --------------------------------------------------------------------------------------


def test_stats_figures_match_the_store(db_url: str, ops: App) -> None:
    now = ops.clock.now()
    ran = [ops.enqueue("work", queue="fast", at=now - timedelta(seconds=3)).id for _ in range(2)]
    claims = ops.store.claim(worker_id="test", queues=None, limit=2, now=ops.clock.now())
    assert sorted(c.job.id for c in claims) == ran
    good, bad = claims
    assert ops.store.finish(good.lease, Outcome(Event.SUCCEED), ops.clock.now())
    failure = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT, error_message="x")
    assert ops.store.finish(bad.lease, failure, ops.clock.now())
    ops.enqueue("late", queue="slow", at=now - timedelta(seconds=40))
    ops.enqueue("late", queue="slow", at=now - timedelta(seconds=10))
    ops.enqueue("later", queue="fast", delay="1h")
    ops.scoped("other").enqueue("theirs", queue="fast")

    figures = as_json(cli(db_url, "stats", "--json"))
    expected: dict[str, dict[str, int]] = {}
    for status, queue, n in query(
        db_url,
        "SELECT status, queue, count(*) FROM duetime_all_jobs WHERE tenant = ? "
        "GROUP BY status, queue",
        ("default",),
    ):
        expected.setdefault(queue, {})[status] = n
    assert (
        figures["by_queue"]
        == expected
        == {
            "fast": {"succeeded": 1, "dead": 1, "scheduled": 1},
            "slow": {"scheduled": 2},
        }
    )
    assert figures["by_status"] == {"succeeded": 1, "dead": 1, "scheduled": 3}
    assert 40 <= figures["oldest_overdue_seconds"] < 100, figures
    five = figures["windows"]["5m"]
    assert (five["started"], five["succeeded"], five["failed"]) == (2, 1, 1), five
    assert five["throughput_per_second"] == round(1 / 300, 4), five
    assert 3 <= five["lag_seconds"]["p50"] <= five["lag_seconds"]["p99"] < 60, five
    assert figures["windows"]["60m"]["succeeded"] == 1 and figures["sampled_attempts"] == 2

    assert as_json(cli(db_url, "stats", "--tenant", "other", "--json"))["by_status"] == {
        "scheduled": 1
    }
    assert as_json(cli(db_url, "stats", "--all", "--json"))["by_status"]["scheduled"] == 4
    text = ok(cli(db_url, "stats"))
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip()}
    assert rows["status"] == ["all", "queues", "fast", "slow"], text
    assert rows["scheduled"] == ["3", "1", "2"] and rows["total"] == ["5", "3", "2"], text
    # its age as of this later call: at least the JSON's (the first digit is not the point: a
    # loaded machine takes seconds per call, and 40 s became "due 5x.xs" or "1m 0xs")
    assert "last 5m" in text, text
    shown = re.search(r"^oldest overdue job: due (?:(\d+)m (\d+)s|([\d.]+)s) ago", text, re.M)
    assert shown, text
    minutes, secs, plain = shown.groups()
    age = float(plain) if plain else int(minutes) * 60 + int(secs)
    assert figures["oldest_overdue_seconds"] - 1 <= age < 100, (figures, text)  # shown to 1 s


# -- dead letters -------------------------------------------------------------------------------


def test_dlq_list_and_replay(db_url: str, ops: App) -> None:
    a = make_dead(ops, "a", "qa", 3)
    b = make_dead(ops, "b", "qb", 2)
    c = make_dead(ops, "c", "qc", 5)
    alive = ops.enqueue("a", queue="qa", delay="1h").id

    page = as_json(cli(db_url, "dlq", "list", "--json"))
    assert [i["id"] for i in page["items"]] == sorted(a + b + c, reverse=True), page
    assert page["next_cursor"] is None
    item = page["items"][0]
    assert item["status"] == "dead" and "attempt_history" not in item, item
    assert item["last_attempt"]["error_message"] == f"boom {item['id']}", item
    assert item["last_attempt"]["error_category"] == "permanent", item
    assert [
        i["id"] for i in as_json(cli(db_url, "dlq", "list", "--task", "a", "--json"))["items"]
    ] == sorted(a, reverse=True)
    assert len(as_json(cli(db_url, "dlq", "list", "--queue", "qb", "--json"))["items"]) == 2
    first = as_json(cli(db_url, "dlq", "list", "--limit", "4", "--json"))
    assert first["next_cursor"] == first["items"][-1]["id"], first
    rest = as_json(cli(db_url, "dlq", "list", "--cursor", str(first["next_cursor"]), "--json"))
    assert len(first["items"]) + len(rest["items"]) == 10 and rest["next_cursor"] is None
    lines = ok(cli(db_url, "dlq", "list", "--task", "b", "--limit", "1")).splitlines()
    assert lines[0].split() == ["id", "task", "queue", "attempts", "died", "(UTC)", "last", "error"]
    assert lines[1].split()[:4] == [str(b[1]), "b", "qb", "1/1"], lines
    assert lines[1].endswith(f"permanent: boom {b[1]}") and lines[2] == f"next cursor: {b[1]}"

    # no selection, or ids and a filter: usage errors; a filter without --yes is not confirmed
    usage_error(cli(db_url, "dlq", "replay"), "--all")
    usage_error(cli(db_url, "dlq", "replay", str(a[0]), "--task", "a"), "not both")
    usage_error(cli(db_url, "dlq", "replay", "--all", "--per-second", "0"))
    failed(cli(db_url, "dlq", "replay", "--task", "a"), "3 dead jobs needs --yes")
    assert len(as_json(cli(db_url, "dlq", "list", "--json"))["items"]) == 10

    # ids: each replayed or skipped with its reason; some skipped -> exit 1
    report = as_json(
        cli(db_url, "dlq", "replay", str(a[0]), str(a[1]), "999999", str(alive), "--json"), 1
    )
    assert (report["matched"], report["replayed"], report["replayed_ids"]) == (4, 2, a[:2])
    assert [(s["id"], "does not exist" in s["reason"]) for s in report["skipped"]] == [
        (999999, True),
        (alive, False),
    ]
    assert "is scheduled, not dead" in report["skipped"][1]["reason"], report
    assert {ops.get_job(i).status for i in a[:2]} == {"scheduled"}

    # a filter, confirmed: the progress line goes to stderr (not a terminal: only the end)
    done = cli(db_url, "dlq", "replay", "--task", "b", "--yes")
    assert ok(done, f"{BAR_DONE} 2/2 jobs 100%\n") == "replayed 2 of 2 jobs\n"
    assert {ops.get_job(i).status for i in b} == {"scheduled"}

    # paced: 5 jobs at 10 a second are replayed over at least 0.4 s
    report = as_json(
        cli(db_url, "dlq", "replay", "--queue", "qc", "--per-second", "10", "--yes", "--json")
    )
    assert report["replayed_ids"] == c and report["skipped"] == [], report
    moved = sorted(ops.get_job(i).updated_at for i in c)
    assert moved[-1] - moved[0] >= timedelta(seconds=0.39), moved

    # --all: whatever is still dead (a[2]); then nothing is left
    report = as_json(cli(db_url, "dlq", "replay", "--all", "--yes", "--json"))
    assert report["replayed_ids"] == [a[2]], report
    assert ok(cli(db_url, "dlq", "replay", "--all")) == "no dead jobs match\n"
    assert as_json(cli(db_url, "dlq", "list", "--json")) == {"items": [], "next_cursor": None}


# -- enqueue --from-file ------------------------------------------------------------------------


def test_enqueue_from_file(db_url: str, ops: App, tmp_path: Path) -> None:
    lines = [
        {"task": "mail", "args": {"to": "ada"}, "key": "m-ada", "priority": 5},
        {"task": "mail", "args": {"to": "bob"}, "key": "m-bob", "due_at": "2030-01-01T09:00:00Z"},
        {"task": "sms", "args": {}, "key": "s-1", "delay_seconds": 60, "max_attempts": 2},
        {"task": "sms", "key": "s-2", "queue": "texts", "deadline": "2031-01-01T00:00:00Z"},
        {"task": "mail", "args": {"to": "ada"}, "key": "m-ada", "priority": 5},  # the same job
    ]
    good = tmp_path / "good.jsonl"
    good.write_text(
        "\n".join(map(json.dumps, lines[:2])) + "\n\n" + "\n".join(map(json.dumps, lines[2:]))
    )
    first = as_json(cli(db_url, "enqueue", "--from-file", str(good), "--queue", "bulk", "--json"))
    assert (first["created"], first["deduplicated"]) == (4, 1), first
    ids = first["ids"]
    assert len(ids) == 5 and ids[4] == ids[0], first
    jobs = [ops.get_job(i) for i in ids[:4]]
    assert [(j.task, j.queue, j.priority, j.idempotency_key) for j in jobs] == [
        ("mail", "bulk", 5, "m-ada"),
        ("mail", "bulk", 0, "m-bob"),
        ("sms", "bulk", 0, "s-1"),
        ("sms", "texts", 0, "s-2"),
    ]
    assert jobs[1].due_at == datetime(2030, 1, 1, 9, tzinfo=UTC)
    assert jobs[2].max_attempts == 2 and jobs[2].due_at > datetime.now(UTC)
    assert jobs[3].deadline_at == datetime(2031, 1, 1, tzinfo=UTC)

    # a second run: every keyed line finds its job; in batches of 2, with a progress line
    done = cli(db_url, "enqueue", "--from-file", str(good), "--queue", "bulk", "--batch", "2")
    assert ok(done, f"{BAR_DONE} 5/5 jobs 100%\n") == (
        "enqueued 5 jobs: 0 created, 5 deduplicated "
        "(idempotency key used before, or within a unique window)\n"
    )
    assert count_jobs(db_url) == 4

    # bad lines: all named, nothing stored
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"task": "ok"}\n{"task": "x", "args": [1]}\n{"task": "ok"}\nnot json\n'
        '{"args": {}}\n{"task": "x", "at": "2030-01-01T00:00:00", "bogus": 1}\n'
        '{"task": "x", "priority": 9999}\n{"task": "mail", "key": "k9"}\n'
        '{"task": "mail", "key": "k9", "args": {"other": 1}}\n'
    )
    message = failed(cli(db_url, "enqueue", "--from-file", str(bad)), "6 bad lines")
    for fragment in [
        "line 2: args must be a JSON object",
        "line 4: not valid JSON",
        'line 5: has no "task"',
        "line 6: unknown field 'bogus'",
        "line 7: priority must be between",
        "line 9: idempotency key 'k9' is used on line 8 with a different request",
    ]:
        assert fragment in message, message
    assert "line 1:" not in message and "line 3:" not in message, message
    assert count_jobs(db_url) == 4, "a bad line must leave the whole file unstored"

    # stdin; and a key already used for another request fails that batch, after the earlier
    stdin = '{"task": "t", "args": {"n": 1}}\n{"task": "t", "key": "m-ada"}\n'
    assert ok(cli(db_url, "enqueue", "--from-file", "-", stdin=stdin[:32])) == (
        "enqueued 1 jobs: 1 created, 0 deduplicated "
        "(idempotency key used before, or within a unique window)\n"
    )
    failed(
        cli(db_url, "enqueue", "--from-file", "-", "--batch", "1", "--json", stdin=stdin),
        "'m-ada' was already used",
        "in line 2 of stdin: not stored",
        "the 1 jobs of the lines before were stored",
    )
    assert count_jobs(db_url) == 6
    usage_error(cli(db_url, "enqueue", "--from-file", str(good), "--key", "k"), "--key")
    failed(cli(db_url, "enqueue", "--from-file", str(tmp_path / "missing.jsonl")), "cannot read")


# -- jobs list ----------------------------------------------------------------------------------


def test_jobs_list_due_filters_and_cursor(db_url: str, ops: App) -> None:
    ids = [ops.enqueue("t", at=f"2030-01-01T0{h}:00:00Z").id for h in range(5)]

    def listed(*args: str) -> tuple[list[int], int | None]:
        page = as_json(cli(db_url, "jobs", "list", *args, "--json"))
        return [item["id"] for item in page["items"]], page["next_cursor"]

    window = ["--due-after", "2030-01-01T01:00:00Z", "--due-before", "2030-01-01T04:00:00+01:00"]
    assert listed(*window) == ([ids[2], ids[1]], None), "due_before is exclusive"
    assert listed(*window, "--limit", "1") == ([ids[2]], ids[2])
    # the last page, exactly full: no cursor, since nothing follows
    assert listed(*window, "--limit", "1", "--cursor", str(ids[2])) == ([ids[1]], None)
    assert listed("--due-after", "2030-01-01T03:30:00Z") == ([ids[4]], None)
    text = ok(cli(db_url, "jobs", "list", "--limit", "2")).splitlines()
    assert [line.split()[0] for line in text] == ["id", str(ids[4]), str(ids[3]), "next"], text
    assert text[-1] == f"next cursor: {ids[3]}"
    usage_error(cli(db_url, "jobs", "list", "--due-after", "2030-01-01T00:00:00"), "no UTC offset")


# -- schedules backfill in chunks ---------------------------------------------------------------


def test_backfill_of_a_long_range_runs_in_chunks_paced_as_one(db_url: str) -> None:
    add = ["schedules", "add", "m", "--task", "t", "--cron", "* * * * *", "--tz", "UTC"]
    ok(cli(db_url, *add, "--start", "2026-01-01T00:00:00Z"))
    span = ["--from", "2026-02-01T00:00:00Z", "--to", "2026-02-01T16:40:00Z"]  # 1001 ticks
    done = cli(db_url, "schedules", "backfill", "m", *span)
    assert ok(done, f"{BAR_DONE} 1001/1001 ticks 100%\n") == (
        "backfill: 1001 new occurrences, 0 ticks had one already, "
        "0 skipped (overlap policy or DST gap)\n"
    )
    nominal = [r[0] for r in query(db_url, "SELECT nominal_at FROM duetime_all_jobs")]
    assert len(nominal) == len(set(nominal)) == 1001
    dues = sorted(ops_time(r[0]) for r in query(db_url, "SELECT due_at FROM duetime_all_jobs"))
    gaps = [b - a for a, b in itertools.pairwise(dues)]
    assert all(abs(gap - 1) < 0.001 for gap in gaps), (min(gaps), max(gaps))  # one a second

    again = as_json(cli(db_url, "schedules", "backfill", "m", *span, "--json"))
    assert (again["enqueued"], again["existing"], again["skipped"]) == (0, 1001, 0)
    big = ["--from", "2026-01-01T00:00:00Z", "--to", "2026-01-10T00:00:00Z"]
    usage_error(cli(db_url, "schedules", "backfill", "m", *big), "more than 10000 ticks")
    assert count_jobs(db_url) == 1001


def ops_time(value: Any) -> float:
    """A stored instant in seconds: SQLite keeps microseconds, PostgreSQL a timestamptz."""
    return value.timestamp() if isinstance(value, datetime) else value / 1_000_000


def test_backfill_chunks_cover_the_range_back_to_back() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    fires = [start + timedelta(minutes=m) for m in range(11)]
    for first, last, size in [
        (start, fires[-1], 5),  # a lone last tick at the end joins the chunk before
        (start - timedelta(seconds=30), fires[-1] + timedelta(seconds=30), 5),
        (start, fires[-1], 100),
        (start, fires[-1], 1),
    ]:
        chunks = backfill_chunks(fires, first, last, size)
        assert chunks[0][0] == first and chunks[-1][1] == last
        assert [t for _, _, ticks in chunks for t in ticks] == fires
        for (a, b, ticks), following in zip(chunks, [*chunks[1:], None], strict=True):
            assert a < b and all(a <= t <= b for t in ticks), (a, b, ticks)
            if following is not None:
                assert following[0] == b + timedelta(microseconds=1)
    assert len(backfill_chunks(fires, start, fires[-1], 5)) == 2
    assert backfill_chunks([], start, fires[-1], 5) == [(start, fires[-1], [])]


# -- the progress bar ---------------------------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_redraws_on_a_terminal_and_only_ends_elsewhere() -> None:
    tty = FakeTerminal()
    bar = Progress(5000, stream=tty)
    bar.INTERVAL = 0
    with bar:
        bar.update(1250)
        bar.update(5000)
    assert tty.getvalue() == (
        "\r[....................] 0/5000 jobs 0%"
        "\r[#####...............] 1250/5000 jobs 25%"
        f"\r{BAR_DONE} 5000/5000 jobs 100%\n"
    )
    slow = FakeTerminal()
    bar = Progress(4, stream=slow)
    bar.INTERVAL = 60
    with bar:
        for n in range(1, 5):
            bar.update(n)  # redrawn at most every INTERVAL seconds, and when complete
    assert slow.getvalue() == (f"\r[....................] 0/4 jobs 0%\r{BAR_DONE} 4/4 jobs 100%\n")
    plain = io.StringIO()
    with Progress(3, "ticks", stream=plain) as bar:
        for n in range(1, 4):
            bar.update(n)
    assert plain.getvalue() == f"{BAR_DONE} 3/3 ticks 100%\n"
    quiet = FakeTerminal()
    with Progress(3, stream=quiet, enabled=False) as bar:
        bar.update(3)
    assert quiet.getvalue() == ""
    broken = FakeTerminal()
    bar = Progress(4, stream=broken)
    bar.INTERVAL = 0
    with pytest.raises(RuntimeError), bar:
        bar.update(2)
        raise RuntimeError
    assert broken.getvalue().endswith("2/4 jobs 50%\n"), "an error starts on a fresh line"


def test_progress_bar_of_a_real_command_on_a_terminal(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tty.db'}"
    source = tmp_path / "jobs.jsonl"
    source.write_text("".join(json.dumps({"task": "t", "args": {"n": n}}) + "\n" for n in range(3)))
    command = ["enqueue", "--from-file", str(source), "--batch", "1", "--database-url", url]
    master, slave = os.openpty()
    stdout_path = tmp_path / "stdout.txt"
    try:
        with open(stdout_path, "wb") as stdout_file:
            proc = subprocess.Popen(
                [str(DUETIME), *command],
                stdin=subprocess.DEVNULL,
                stdout=stdout_file,
                stderr=slave,
                env=base_env(),
            )
    finally:
        os.close(slave)
    received = b""
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the command exited and closed the terminal
            break
        if not data:
            break
        received += data
    os.close(master)
    stdout = stdout_path.read_text() if proc.wait(30) == 0 else ""
    stderr = received.decode()
    assert proc.returncode == 0, (stdout_path.read_text(), stderr)
    assert stderr.startswith("\r[") and stderr.count("\r[") >= 2, repr(stderr)
    assert stderr.rstrip().endswith(f"{BAR_DONE} 3/3 jobs 100%"), repr(stderr)
    assert (
        stdout == "enqueued 3 jobs: 3 created, 0 deduplicated "
        "(idempotency key used before, or within a unique window)\n"
    )

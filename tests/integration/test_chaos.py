"""The short chaos run: real workers on a private PostgreSQL, under SIGKILL, SIGSTOP and server
restarts, judged by the history checker (docs/chaos.md). About a minute on two cores."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from duetime import App
from duetime.chaos import checker
from duetime.chaos.app import create_tables
from duetime.chaos.netns import missing_tools
from duetime.chaos.skew import missing as skew_missing
from duetime.core.models import Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event
from duetime.store import open_store

# a job is in one of these (it moves to the history table as it ends: docs/history-plan.md)
JOB_TABLES = ("duetime_jobs", "duetime_jobs_done")


def _passing_run(tmp_path: Path, *flags: str, timeout: float = 220) -> dict[str, Any]:
    """`python -m duetime.chaos.run` with `flags`: its JSON report, which must pass."""
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "duetime.chaos.run", *flags, "--report", str(report_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = f"stdout:\n{done.stdout[-6000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert report_path.exists(), f"the chaos run wrote no report (exit {done.returncode})\n{output}"
    report: dict[str, Any] = json.loads(report_path.read_text())
    check = report["check"]
    assert done.returncode == 0 and report["ok"], f"violations: {check['violations']}\n{output}"
    return report


@pytest.mark.long
@pytest.mark.timeout(240)
def test_short_chaos_run_passes_the_history_checker(tmp_path: Path) -> None:
    report = _passing_run(
        tmp_path,
        *("--jobs", "1500", "--duration", "40", "--workers", "3"),
        *("--seed", "20261129", "--drain-timeout", "60"),
    )
    check = report["check"]

    driver = report["driver"]
    counts = check["counts"]
    assert driver["enqueued"] == 1500
    assert driver["pg_restarts"] >= 1
    assert driver["sigkills"] >= 3
    assert driver["sigstops"] >= 1
    assert driver["not_terminal_after_drain"] == 0
    assert counts["lost_jobs"] == 0
    assert counts["stale_completions_accepted"] == 0
    assert counts["double_effects"] == 0
    assert counts["accepted_by_driver"] == 1500
    assert counts["lost_attempts"] >= 1, "the faults never cost an attempt: they did not bite"
    assert check["violation_totals"] == {}


@pytest.mark.long
@pytest.mark.timeout(240)
def test_short_dependencies_and_sequences_chaos_run_passes_the_history_checker(
    tmp_path: Path,
) -> None:
    """The dependencies variant (make chaos-deps): a third of the jobs' numbers enqueue a
    group with a callback or a chain (app.group, app.chain), and a share of the others a job
    of one of 16 sequences, while workers are SIGKILLed and SIGSTOPped and PostgreSQL
    restarts: no child lost (left blocked) or started before its parents ended, every cascade
    right; every job of a sequence ended, none started before an earlier one of its key ended,
    no two of one key ran at once; a unique enqueue made twice made one job."""
    report = _passing_run(
        tmp_path,
        *("--dependencies", "--sequences", "--jobs", "800", "--duration", "35"),
        *("--workers", "3"),
        *("--seed", "20261202", "--drain-timeout", "60"),
    )
    check = report["check"]
    counts = check["counts"]
    assert report["driver"]["graphs"] >= 100
    assert report["driver"]["sigkills"] >= 3
    assert counts["lost_jobs"] == 0  # no child left blocked: no release lost
    assert counts["children_released_early"] == 0
    assert counts["children_released"] >= 100
    assert counts["children_cancelled_by_a_parent"] >= 1  # cascades happened, and were right
    assert counts["double_effects"] == 0
    assert report["driver"]["sequence_jobs"] >= 100
    assert report["driver"]["sequence_holds_dismissed"] >= 1  # a dead job held its key
    assert report["driver"]["unique_duplicates"] == 0
    assert counts["sequence_jobs_by_status"].get("succeeded", 0) >= 50
    assert counts["sequence_attempts_by_status"].get("failed", 0) >= 1  # retries happened
    assert counts["sequence_jobs_lost"] == 0
    assert counts["sequence_order_violations"] == 0
    assert counts["sequence_overlaps"] == 0
    assert check["violation_totals"] == {}


@pytest.mark.long
@pytest.mark.timeout(300)
def test_short_failover_chaos_run_passes_the_history_checker(tmp_path: Path) -> None:
    """The failover variant (make chaos-failover, docs/production.md): a primary and a
    synchronous standby on a multi-host URL; the primary is killed, the standby promoted 4 s
    later and the dead node rebuilt as the new standby (twice, unless a loaded machine makes
    the first rebuild run past the second's slot), among the usual SIGKILLs and SIGSTOPs.
    Nothing acknowledged is lost, no stale completion is accepted, no effect is doubled, and
    jobs start again within 10 s of each promotion.

    Beside the three workers: one whose clock runs 30 s fast and one 30 s slow (libfaketime),
    which start nothing before it is due by the database's clock, and one in its own network
    namespace, cut off silently for 10 s (past its leases) early in the run: another worker
    takes over what it held, and it serves again soon after the heal, without a restart."""
    for why in (missing_tools(), skew_missing()):
        assert why is None, f"{why} (the failover chaos test runs a partition and skewed clocks)"
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "duetime.chaos.run",
            "--failover",
            "sync",
            "--jobs",
            "800",
            "--duration",
            "30",
            "--workers",
            "3",
            "--seed",
            "7",
            "--drain-timeout",
            "90",
            "--skew",
            "30",
            "--skew=-30",
            "--partition",
            "--report",
            str(report_path),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    output = f"stdout:\n{done.stdout[-6000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert report_path.exists(), f"the chaos run wrote no report (exit {done.returncode})\n{output}"
    report = json.loads(report_path.read_text())
    check = report["check"]
    assert done.returncode == 0 and report["ok"], f"violations: {check['violations']}\n{output}"
    failover = report["failover"]
    # two are planned (30% and 65% of the run); on a loaded machine the first one's standby
    # rebuild can run past the second's slot
    assert failover["promotions"] >= 1, failover
    assert failover["acknowledged"] == 800, failover
    assert failover["lost_acknowledged"] == 0, failover
    assert failover["not_terminal"] == 0, failover
    assert failover["stale_completions_accepted"] == 0, failover
    assert failover["double_effects"] == 0, failover
    assert all(r is not None and r <= 10 for r in failover["resume_after_promotion_s"]), failover
    assert failover["refused_max_s"] <= 8, failover  # the enqueuer's pool_timeout is 5 s
    # the skewed workers ran jobs (their clocks show in the execution log), none early
    assert failover["early_starts"] == 0, failover
    offsets = sorted(failover["worker_clock_offsets_s"].values())
    assert len(offsets) == 2 and offsets[0] < -25 and offsets[1] > 25, failover
    # the partition: cut past the leases, what the cut worker held taken over, served again
    cut = failover["partition"]
    assert cut["cut_s"] >= 9.5, cut
    # each job it held once cut off was claimed again, or ended by the reaper (its deadline)
    held = cut["held_jobs_claimed_again"] + cut["held_jobs_ended_by_the_reaper"]
    assert held == cut["jobs_held_at_cut"], cut
    if cut["jobs_held_at_cut"] > cut["held_jobs_ended_by_the_reaper"]:
        assert cut["taken_over_after_cut_s"] is not None, cut
        assert cut["taken_over_after_cut_s"] <= cut["cut_s"] + 10, cut
    assert cut["served_again_after_heal_s"] is not None, cut
    assert cut["served_again_after_heal_s"] <= 15, cut
    assert cut["served_again_by_same_process"], cut
    assert report["driver"]["extra_workers_started"]["worker-netns-"] == 1, report["driver"]
    assert check["violation_totals"] == {}


@pytest.mark.long
@pytest.mark.timeout(240)
def test_short_outbox_chaos_run_passes_the_history_checker(tmp_path: Path) -> None:
    """The outbox variant (docs/outbox.md): every job through RabbitMQ, relays SIGKILLed,
    the broker stopped and restarted, judged by the same checker."""
    from amqpbroker import broker_url, restore

    report_path = tmp_path / "report.json"
    url = broker_url()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "duetime.chaos.run",
                "--outbox",
                "--broker-url",
                url,
                "--jobs",
                "600",
                "--duration",
                "25",
                "--workers",
                "3",
                "--seed",
                "11",
                "--drain-timeout",
                "90",
                "--report",
                str(report_path),
            ],
            capture_output=True,
            text=True,
            timeout=220,
            check=False,
        )
    finally:
        restore(url)
    output = f"stdout:\n{done.stdout[-6000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert report_path.exists(), f"the chaos run wrote no report (exit {done.returncode})\n{output}"
    report = json.loads(report_path.read_text())
    check = report["check"]
    assert done.returncode == 0 and report["ok"], f"violations: {check['violations']}\n{output}"
    driver = report["driver"]
    assert driver["outbox"] and driver["enqueued"] == 600
    assert driver["relay_sigkills"] >= 1 and driver["broker_restarts"] == 1
    assert driver["not_terminal_after_drain"] == 0
    assert check["counts"]["lost_jobs"] == 0
    assert check["counts"]["stale_completions_accepted"] == 0
    assert check["counts"]["double_effects"] == 0
    assert check["violation_totals"] == {}


@pytest.fixture
def chaos_db() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database with the chaos tables."""
    import pgserver

    url = pgserver.create_database("duetime_chaos")
    try:
        store = open_store(url)
        try:
            store.migrate()
        finally:
            store.close()
        create_tables(url)
        yield url
    finally:
        pgserver.drop_database(url)


def _one_succeeded_effect_job(url: str) -> int:
    """Run one chaos.effect job by hand, as a worker would: log, effect, fenced success."""
    return _succeeded_effect_claim(url).job.id


def _succeeded_effect_claim(url: str) -> Any:
    """_one_succeeded_effect_job's claim (its job and lease)."""
    app = App(url)
    app.task(lambda n, kind: None, name="chaos.effect", lease=3)
    try:
        job = app.enqueue("chaos.effect", {"n": 0, "kind": "immediate"})
        [claim] = app.store.claim(
            worker_id="host:4242:abc", queues=None, limit=1, now=datetime.now(UTC)
        )
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO chaos_accepted VALUES (%s, 'immediate', 'chaos.effect', %s, NULL, %s)",
                (job.id, job.due_at, datetime.now(UTC)),
            )
            conn.execute(
                "INSERT INTO chaos_executions (job_id, generation, attempt, business_key, task,"
                " kind, pid, started_at, due_at) VALUES (%s, 1, 1, %s, 'chaos.effect',"
                " 'immediate', 4242, %s, %s)",
                (job.id, job.business_key, datetime.now(UTC), job.due_at),
            )
        with app.store.completion(
            claim.lease, Outcome(Event.SUCCEED), lambda: datetime.now(UTC)
        ) as conn:
            conn.execute(
                "INSERT INTO chaos_effects (job_id, generation, business_key, pid)"
                " VALUES (%s, 1, %s, 4242)",
                (job.id, job.business_key),
            )
        return claim
    finally:
        app.close()


def test_checker_passes_a_clean_history_and_flags_a_double_effect(
    chaos_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = _one_succeeded_effect_job(chaos_db)
    report = checker.check(chaos_db)
    assert report.ok, report.text()
    assert report.counts["local_effects"] == 1
    assert report.counts["lost_jobs"] == 0

    with psycopg.connect(chaos_db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO chaos_effects (job_id, generation, business_key, pid)"
            " SELECT id, 2, business_key, 4243 FROM duetime_all_jobs WHERE id = %s",
            (job_id,),
        )
        # early by the database's clock, though this worker's own clock (30 s fast) said late
        conn.execute(
            "INSERT INTO chaos_executions (job_id, generation, attempt, business_key, task,"
            " kind, pid, started_at, due_at, db_started_at) SELECT id, 1, 1, business_key,"
            " task, 'immediate', 4243, due_at + interval '29 seconds', due_at,"
            " due_at - interval '1 second' FROM duetime_all_jobs WHERE id = %s",
            (job_id,),
        )
    assert checker.main(["--database-url", chaos_db]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out
    assert "VIOLATION local_effect_not_once" in out
    assert "VIOLATION business_key_effect_twice" in out
    assert "VIOLATION attempt_executed_twice" in out
    assert "VIOLATION executed_before_due" in out


def test_a_failure_reported_after_its_own_committed_success_is_not_a_stale_completion(
    chaos_db: str,
) -> None:
    """A handler's completion transaction commits its success, but the answer to the COMMIT
    is lost (the primary killed at that moment): the handler sees an error and the worker
    reports a failure for the same claim, which is refused and kept as a late report on the
    succeeded attempt. Nothing stale was accepted (the success was the live claim's, before
    the report), so the checker counts it apart; a late report recorded before the success
    was accepted is still a violation."""
    claim = _succeeded_effect_claim(chaos_db)
    store = open_store(chaos_db)
    try:
        failed = Outcome(
            Event.RETRY,
            due_at=datetime.now(UTC),
            error_category=ErrorCategory.RETRYABLE,
            error_message="the COMMIT's answer was lost",
        )
        assert not store.finish(claim.lease, failed, datetime.now(UTC) + timedelta(seconds=1))
    finally:
        store.close()
    report = checker.check(chaos_db)
    assert report.ok, report.text()
    assert report.counts["late_reports_after_own_success"] == 1
    assert report.counts["stale_completions_accepted"] == 0

    with psycopg.connect(chaos_db, autocommit=True) as conn:  # the report came first
        # (the success is on its job's row, migration 24: its end is updated_at; the row is
        # in the history table once the job has moved there: docs/history-plan.md)
        for table in JOB_TABLES:
            conn.execute(
                f"UPDATE {table} SET late_reported_at = updated_at - interval '1 second'"
                " WHERE id = %s AND status = 'succeeded' AND attempt_id IS NOT NULL",
                (claim.job.id,),
            )
    flagged = checker.check(chaos_db)
    assert flagged.totals.get("stale_completion_accepted") == 1, flagged.text()


def test_an_execution_logged_again_after_a_lost_commit_answer_is_one_row(chaos_db: str) -> None:
    """The execution log's insert is retried when its connection drops (a promotion, a
    partition); when the first insert had committed, the retry must not make one execution
    look like two (the checker's attempt_executed_twice)."""
    from duetime.chaos import app as chaos_module

    row = (7, 1, 1, "key-7", "chaos.effect", "immediate", 4242)
    saved = chaos_module.app.database_url
    chaos_module.app.database_url = chaos_db
    try:
        due = datetime.now(UTC)
        key = chaos_module.log_execution(row, due, None, key="exec-7")
        assert chaos_module.log_execution(row, due, None, key=key) == key  # the retry
    finally:
        chaos_module.app.database_url = saved
        side = getattr(chaos_module._local, "conn", None)
        if side is not None:
            side.close()
            chaos_module._local.conn = None
    with psycopg.connect(chaos_db, autocommit=True) as conn:
        found = conn.execute("SELECT count(*) FROM chaos_executions WHERE job_id = 7").fetchone()
    assert found is not None and found[0] == 1


def _claim_and_log(app: App, url: str, job_id: int) -> Any:
    """Claim the next job, which must be `job_id`, and log its execution as a handler does
    (chaos.app's _begin: db_started_at is the database's clock_timestamp()); its Claim."""
    [claim] = app.store.claim(
        worker_id="host:4242:abc", queues=None, limit=1, now=datetime.now(UTC)
    )
    assert claim.job.id == job_id
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO chaos_executions (job_id, generation, attempt, business_key, task,"
            " kind, pid, started_at, due_at) VALUES (%s, %s, 1, %s, %s, 'test', 4242, %s, %s)",
            (
                job_id, claim.attempt.generation, claim.job.business_key, claim.job.task,
                datetime.now(UTC), claim.job.due_at,
            ),
        )  # fmt: skip
    return claim


def test_the_checker_judges_dependencies(chaos_db: str) -> None:
    """A parent that succeeds releases its child, which runs after it; a parent that dies
    cancels its child: a clean history passes. Then a child that started before its parent's
    success, ran with a parent's end untold, and a cascade naming the wrong parent are each
    flagged."""
    app = App(chaos_db)
    app.task(lambda n, kind: None, name="chaos.effect", lease=3)

    def now() -> datetime:
        return datetime.now(UTC)

    def run(job_id: int, succeed: bool) -> None:
        claim = _claim_and_log(app, chaos_db, job_id)
        if not succeed:
            failed = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT)
            assert app.store.finish(claim.lease, failed, now())
            return
        with app.store.completion(claim.lease, Outcome(Event.SUCCEED), now) as conn:
            conn.execute(
                "INSERT INTO chaos_effects (job_id, generation, business_key, pid)"
                " VALUES (%s, %s, %s, 4242)",
                (job_id, claim.attempt.generation, claim.job.business_key),
            )

    try:
        parent = app.enqueue("chaos.effect", {"n": 1, "kind": "immediate"})
        doomed = app.enqueue("chaos.effect", {"n": 2, "kind": "immediate"})
        child = app.enqueue("chaos.effect", {"n": 3, "kind": "x"}, depends_on=[parent.id])
        orphan = app.enqueue("chaos.effect", {"n": 4, "kind": "x"}, depends_on=[doomed.id])
        run(parent.id, True)
        run(doomed.id, False)
        run(child.id, True)
    finally:
        app.close()
    report = checker.check(chaos_db)
    assert report.ok, report.text()
    assert report.counts["children"] == 2
    assert report.counts["children_released"] == 1
    assert report.counts["children_cancelled_by_a_parent"] == 1

    with psycopg.connect(chaos_db, autocommit=True) as conn:
        conn.execute(
            "UPDATE chaos_executions SET db_started_at = db_started_at - interval '1 hour'"
            " WHERE job_id = %s",
            (child.id,),
        )
        conn.execute(
            "UPDATE duetime_job_parents SET outcome = NULL WHERE child_id = %s", (child.id,)
        )
        for table in JOB_TABLES:
            conn.execute(
                f"UPDATE {table} SET cancel_reason = %s WHERE id = %s",
                (f"parent job {parent.id} ended dead", orphan.id),
            )
    flagged = checker.check(chaos_db).totals
    assert flagged["child_started_before_parents_ended"] == 1
    assert flagged["child_released_with_a_parent_untold"] == 1
    assert flagged["link_outcome_wrong"] == 1
    assert flagged["cascade_wrong"] == 1


def test_the_checker_judges_sequences(chaos_db: str) -> None:
    """Two jobs of one key run one after the other, a third of the key is cancelled while it
    waits: a clean history passes. Then the second's execution moved to before the first's
    end is flagged as out of order and as an overlap, and a job of a key left waiting as not
    ended; a claim's stamp alone before the previous end is only counted."""
    app = App(chaos_db)
    app.task(lambda n, kind: None, name="seq.plain", lease=3)  # no effect to judge

    def now() -> datetime:
        return datetime.now(UTC)

    def run(job_id: int) -> None:
        claim = _claim_and_log(app, chaos_db, job_id)
        assert app.store.finish(claim.lease, Outcome(Event.SUCCEED), now())

    try:
        first = app.enqueue("seq.plain", {"n": 1, "kind": "seq"}, sequence="acct-1")
        second = app.enqueue("seq.plain", {"n": 2, "kind": "seq"}, sequence="acct-1")
        third = app.enqueue("seq.plain", {"n": 3, "kind": "seq"}, sequence="acct-1")
        app.cancel(third.id)  # it waits behind the second: ends without an attempt
        run(first.id)
        run(second.id)
    finally:
        app.close()
    report = checker.check(chaos_db)
    assert report.ok, report.text()
    assert report.counts["sequence_keys"] == 1
    assert report.counts["sequence_jobs"] == 3
    assert report.counts["sequence_attempts"] == 2

    with psycopg.connect(chaos_db, autocommit=True) as conn:
        for table in JOB_TABLES:  # (both successes are on their jobs' rows, migration 24)
            conn.execute(
                f"UPDATE {table} SET started_at = (SELECT finished_at - interval '1 ms'"
                " FROM duetime_all_attempts WHERE job_id = %s) WHERE id = %s",
                (first.id, second.id),
            )
    stamped = checker.check(chaos_db)
    assert stamped.ok, stamped.text()
    assert stamped.counts["sequence_claims_stamped_before_the_previous_end"] == 1

    with psycopg.connect(chaos_db, autocommit=True) as conn:
        conn.execute(
            "UPDATE chaos_executions SET db_started_at = (SELECT finished_at - interval '1 ms'"
            " FROM duetime_all_attempts WHERE job_id = %s) WHERE job_id = %s",
            (first.id, second.id),
        )
        conn.execute("UPDATE duetime_jobs SET status = 'waiting' WHERE id = %s", (third.id,))
    flagged = checker.check(chaos_db).totals
    assert flagged["sequence_order_broken"] == 1
    assert flagged["sequence_overlap"] == 1
    assert flagged["sequence_job_not_ended"] == 1


def _at(seconds: float) -> datetime:
    return datetime(2026, 12, 2, tzinfo=UTC) + timedelta(seconds=seconds)


def _seq_attempt(
    job_id: int, generation: int, status: str, start: float, end: float, lease: float
) -> checker.SeqAttempt:
    return checker.SeqAttempt(
        job_id, generation, status, _at(start), _at(end), _at(lease), executed_at=_at(start)
    )


def test_judge_sequences_flags_each_kind_alone() -> None:
    """Each violation alone: a lost attempt counts until its lease's end (a zombie's overlap
    with its own job's next generation), a later job started before an earlier one ended
    without any attempt (out of order, no overlap), a job not ended. An attempt that ran no
    handler code, or a zombie that began only after its lease's end, is not judged."""
    jobs = [checker.SeqJob(1, "k", "succeeded", _at(10)), checker.SeqJob(2, "k", "dead", _at(20))]
    clean = [
        _seq_attempt(1, 1, "lost", 0, 1, 3),  # killed: its lease ran until 3
        _seq_attempt(1, 2, "succeeded", 3, 10, 13),  # taken over at its lease's end
        _seq_attempt(2, 1, "failed", 10, 20, 23),
    ]
    verdict = checker.judge_sequences(jobs, clean)
    assert (verdict.not_ended, verdict.out_of_order, verdict.overlaps) == ([], [], [])

    zombie = [_seq_attempt(1, 1, "lost", 0, 1, 3.5), *clean[1:]]
    verdict = checker.judge_sequences(jobs, zombie)
    assert len(verdict.overlaps) == 1 and "job 1 gen 2" in verdict.overlaps[0]
    assert verdict.out_of_order == [] and verdict.not_ended == []

    # job 1 cancelled at 12 without an attempt; job 2 started at 10
    early = checker.judge_sequences(
        [checker.SeqJob(1, "k", "cancelled", _at(12)), jobs[1]], clean[2:]
    )
    assert len(early.out_of_order) == 1 and "earlier job 1" in early.out_of_order[0]
    assert early.overlaps == [] and early.not_ended == []

    unexecuted = [
        *clean,
        checker.SeqAttempt(2, 2, "lost", _at(11), _at(12), _at(14)),  # claimed, never began
        checker.SeqAttempt(1, 3, "lost", _at(1), _at(2), _at(3), executed_at=_at(30)),  # late
    ]
    verdict = checker.judge_sequences(jobs, unexecuted)
    assert (verdict.out_of_order, verdict.overlaps) == ([], [])
    assert verdict.not_executed == 1

    lost = checker.judge_sequences([*jobs, checker.SeqJob(3, "k", "scheduled", _at(20))], clean)
    assert len(lost.not_ended) == 1 and lost.out_of_order == [] and lost.overlaps == []
    other_key = checker.judge_sequences(
        [*jobs, checker.SeqJob(3, "j", "succeeded", _at(0))],
        [*clean, _seq_attempt(3, 1, "succeeded", 0, 30, 33)],
    )
    assert (other_key.out_of_order, other_key.overlaps) == ([], [])  # another key runs beside

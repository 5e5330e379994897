"""The history checker: judge a chaos run from the store and the execution log. It is past 450
lines because every verdict reads the same loaded history (jobs, attempts, the execution
log): one module, one load, the verdicts side by side.

    python -m duetime.chaos.checker --database-url URL [--json]

Reads duetime's tables and the chaos tables (see duetime.chaos.app) and verifies:

* every accepted job exists and reached a terminal state (parked jobs are counted apart);
* no job has more than one succeeded attempt, and a succeeded job's success is its last
  generation's;
* every late report (`late_outcome`) belongs to an attempt that did not succeed, or came
  after its own claim's success (a COMMIT whose answer was lost, reported again): stale
  completions were rejected;
* every local effect applied exactly once per succeeded job of an effect task, by the
  succeeding generation, and never for a job that did not succeed; no business key twice;
* every external effect is at the provider once per business key, for every succeeded
  provider job;
* no schedule tick has two occurrences;
* every execution belongs to a recorded attempt, no attempt executed twice, and executions
  beyond one per job are explained by how their attempt ended (lease lost after a crash, a
  pause, a partition or a database outage; a failure), each counted;
* no execution started before its due time by the database's clock (the execution log's
  db_started_at, stamped by the database: a worker's own clock may be skewed); no attempt
  started at or after the job's deadline;
* dependencies (when the run made any): no child started before its parents ended as it needs,
  a released child had every parent's end told, every cascade of a failed parent
  is right (the child cancelled, never run, its reason naming the parent), every link holds
  its parent's end; a child never released stays blocked, which the first check counts;
* sequences (when the run made any): every job of a sequence ended; no job of a key started
  before every job of that key enqueued before it had ended (order kept); no two attempts of
  one key's jobs ran at once (no overlap), a lost attempt (a killed worker's, or a paused
  worker's fenced-out zombie) counting until its lease's end (judge_sequences).

Exit status 1 on any violation, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from duetime.chaos.app import EFFECT_TASKS, PROVIDER_TASKS

TERMINAL = ("succeeded", "dead", "cancelled", "expired")
SAMPLE = 10  # violations listed per check


@dataclass
class Report:
    counts: dict[str, Any] = field(default_factory=dict)
    violations: dict[str, list[str]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)  # violations per check

    @property
    def ok(self) -> bool:
        return not self.totals

    def violate(self, check: str, items: Sequence[str]) -> None:
        if items:
            self.totals[check] = len(items)
            self.violations[check] = list(items[:SAMPLE])

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "counts": self.counts,
            "violations": self.violations,
            "violation_totals": self.totals,
        }

    def text(self) -> str:
        lines = ["chaos history check: " + ("PASS" if self.ok else "FAIL")]
        for key, value in self.counts.items():
            if isinstance(value, dict):
                inner = ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "none"
                lines.append(f"  {key}: {inner}")
            else:
                lines.append(f"  {key}: {value}")
        for check, items in self.violations.items():
            lines.append(f"VIOLATION {check}: {self.totals[check]}")
            lines.extend(f"    {item}" for item in items)
        return "\n".join(lines)


def _rows(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql).fetchall()]


def check(database_url: str) -> Report:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return _check(conn)


def _check(conn: psycopg.Connection[Any]) -> Report:
    report = Report()
    jobs = {
        r[0]: r
        for r in _rows(
            conn,
            # every job, in either table (a job that ended moves: docs/history-plan.md)
            "SELECT id, task, status, generation, due_at, deadline_at, business_key, "
            "schedule_id, nominal_at FROM duetime_all_jobs",
        )
    }
    # (job_id, generation) -> (status, worker_id, started_at, error_category, late_outcome,
    # finished_at, late_reported_at)
    attempts = {
        (r[0], r[1]): r[2:]
        for r in _rows(
            conn,
            "SELECT job_id, generation, status, worker_id, started_at, error_category, "
            "late_outcome, finished_at, late_reported_at FROM duetime_all_attempts",
        )
    }
    accepted = {r[0]: r for r in _rows(conn, "SELECT job_id, kind, due_at FROM chaos_accepted")}
    executions = _rows(
        conn,
        "SELECT id, job_id, generation, task, kind, pid, db_started_at, due_at, started_at"
        " FROM chaos_executions",
    )
    effects = _rows(conn, "SELECT job_id, generation, business_key FROM chaos_effects")
    provider = _rows(conn, "SELECT business_key, job_id FROM chaos_provider")
    calls = _rows(conn, "SELECT business_key, deduplicated FROM chaos_provider_calls")
    faults = _rows(conn, "SELECT kind, pid FROM chaos_faults")
    killed = {pid for kind, pid in faults if kind == "sigkill"}
    paused = {pid for kind, pid in faults if kind == "sigstop"}
    partitioned = {pid for kind, pid in faults if kind == "partition_cut"}

    status_counts = Counter(j[2] for j in jobs.values())
    report.counts["jobs"] = len(jobs)
    report.counts["accepted_by_driver"] = len(accepted)
    report.counts["jobs_by_status"] = dict(status_counts)
    report.counts["accepted_by_kind"] = dict(Counter(a[1] for a in accepted.values()))
    report.counts["parked"] = status_counts.get("parked", 0)
    report.counts["attempts"] = len(attempts)
    report.counts["attempts_by_status"] = dict(Counter(a[0] for a in attempts.values()))
    report.counts["faults"] = dict(Counter(kind for kind, _ in faults))

    # 1. every accepted job exists and is terminal
    report.violate("accepted_job_missing", [f"job {i}" for i in sorted(accepted) if i not in jobs])
    report.violate(
        "job_not_terminal",
        [
            f"job {j[0]} ({j[1]}) is {j[2]}"
            for j in jobs.values()
            if j[2] not in TERMINAL and j[2] != "parked"
        ],
    )
    report.counts["lost_jobs"] = report.totals.get("accepted_job_missing", 0) + report.totals.get(
        "job_not_terminal", 0
    )

    # 2. at most one succeeded attempt per job, and it is the job's last generation
    succeeded: dict[int, list[int]] = defaultdict(list)
    for (job_id, generation), a in attempts.items():
        if a[0] == "succeeded":
            succeeded[job_id].append(generation)
    report.violate(
        "more_than_one_success",
        [f"job {j}: generations {sorted(g)} succeeded" for j, g in succeeded.items() if len(g) > 1],
    )
    report.violate(
        "success_not_last_generation",
        [
            f"job {j}: succeeded generation {g} but job generation is {jobs[j][3]}"
            for j, gens in succeeded.items()
            for g in gens
            if j in jobs and g != jobs[j][3]
        ],
    )
    report.violate(
        "succeeded_job_without_success",
        [
            f"job {j[0]}"
            for j in jobs.values()
            if j[2] == "succeeded" and j[0] not in succeeded and j[3] > 0
        ],
    )

    # 3. stale completions rejected. A late report on a succeeded attempt is stale only when
    # it came first (the claim was refused, then a success accepted); one recorded after the
    # success is the same claim reporting again because its completion transaction's COMMIT
    # answer was lost (a killed primary): the success was the live claim's, counted apart.
    # Both instants come from the claim's own worker, so its clock's skew cancels.
    late = [(k, a) for k, a in attempts.items() if a[4] is not None]
    report.counts["late_reports"] = dict(Counter(a[4] for _, a in late))
    after_own = [
        k for k, a in late if a[0] == "succeeded" and a[5] is not None and a[6] is not None
        and a[6] > a[5]
    ]  # fmt: skip
    report.counts["late_reports_after_own_success"] = len(after_own)
    report.violate(
        "stale_completion_accepted",
        [
            f"job {k[0]} gen {k[1]}: {a[0]} with late report {a[4]}"
            for k, a in late
            if a[0] in ("succeeded",) and k not in after_own
        ],
    )
    report.counts["stale_completions_accepted"] = report.totals.get("stale_completion_accepted", 0)

    # 4. local effects exactly once per succeeded effect job, by the succeeding generation
    effects_by_job: dict[int, list[int]] = defaultdict(list)
    for job_id, generation, _ in effects:
        effects_by_job[job_id].append(generation)
    bad_effects: list[str] = []
    effect_jobs = 0
    for j in jobs.values():
        if j[1] not in EFFECT_TASKS:
            continue
        effect_jobs += 1
        applied = effects_by_job.get(j[0], [])
        if j[2] == "succeeded":
            if len(applied) != 1:
                bad_effects.append(f"job {j[0]} succeeded with {len(applied)} effects")
            elif applied[0] not in succeeded.get(j[0], []):
                bad_effects.append(
                    f"job {j[0]}: effect by gen {applied[0]}, success by {succeeded.get(j[0])}"
                )
        elif applied:
            bad_effects.append(f"job {j[0]} is {j[2]} but has {len(applied)} effects")
    bad_effects += [f"effect for unknown job {j}" for j in effects_by_job if j not in jobs]
    report.violate("local_effect_not_once", bad_effects)
    keys = Counter(key for _, _, key in effects)
    report.violate(
        "business_key_effect_twice", [f"{k}: {n} effects" for k, n in keys.items() if n > 1]
    )
    report.counts["effect_jobs"] = effect_jobs
    report.counts["local_effects"] = len(effects)
    report.counts["double_effects"] = sum(
        max(0, len(v) - 1) for v in effects_by_job.values()
    ) + sum(n - 1 for n in keys.values() if n > 1)

    # 5. external effects once per business key at the provider
    at_provider = Counter(key for key, _ in provider)
    missing = [
        f"job {j[0]} succeeded but the provider has no charge for {j[6]}"
        for j in jobs.values()
        if j[1] in PROVIDER_TASKS and j[2] == "succeeded" and at_provider[j[6]] == 0
    ]
    twice = [f"{k}: {n} charges" for k, n in at_provider.items() if n > 1]
    report.violate("external_effect_not_once", missing + twice)
    report.counts["provider_calls"] = len(calls)
    report.counts["provider_calls_deduplicated"] = sum(1 for _, dup in calls if dup)
    report.counts["provider_charges"] = len(provider)

    # 6. one occurrence per schedule tick
    per_tick = Counter((j[7], j[8]) for j in jobs.values() if j[7] is not None)
    tick_jobs = _rows(
        conn,
        "SELECT schedule_id, nominal_at, count(DISTINCT job_id) FROM duetime_ticks "
        "WHERE job_id IS NOT NULL GROUP BY schedule_id, nominal_at "
        "HAVING count(DISTINCT job_id) > 1",
    )
    report.violate(
        "tick_with_two_occurrences",
        [f"schedule {s} at {t}: {n} jobs" for (s, t), n in per_tick.items() if n > 1]
        + [f"schedule {s} at {t}: {n} jobs in tick history" for s, t, n in tick_jobs],
    )
    report.counts["schedule_occurrences"] = len(per_tick)

    # 7. executions: each belongs to an attempt, once; extra ones are explained
    per_attempt = Counter((e[1], e[2]) for e in executions)
    report.violate(
        "attempt_executed_twice",
        [f"job {j} gen {g}: {n} executions" for (j, g), n in per_attempt.items() if n > 1],
    )
    report.violate(
        "execution_without_attempt",
        [
            f"execution {e[0]} job {e[1]} gen {e[2]}"
            for e in executions
            if (e[1], e[2]) not in attempts
        ],
    )
    per_job = Counter(e[1] for e in executions)
    report.counts["executions"] = len(executions)
    report.counts["duplicate_executions"] = sum(n - 1 for n in per_job.values() if n > 1)
    explained: Counter[str] = Counter()
    unexplained: list[str] = []
    for e in executions:
        found = attempts.get((e[1], e[2]))
        if found is None or found[0] == "succeeded":
            continue
        a = found
        pid = pid_of(a[1])
        status, category = a[0], a[3]
        if status == "lost":
            if a[4] is not None:  # the worker lived on and reported late: it was not dead
                if pid in partitioned:
                    why = "lost: worker cut off from the database (partition)"
                elif pid in paused:
                    why = "lost: worker SIGSTOPped past its lease"
                else:
                    why = "lost: lease lapsed while the worker ran (database outage)"
            elif pid in killed:
                why = "lost: worker SIGKILLed"
            elif pid in partitioned:
                why = "lost: worker cut off from the database (partition)"
            elif pid in paused:
                why = "lost: worker SIGSTOPped past its lease"
            else:
                why = "lost: lease lapsed (database outage or overload)"
            if a[4] is not None:
                why += f", late {a[4]} rejected"
        elif status == "failed" and e[3] == "chaos.flaky" and category == "retryable":
            why = "failed: planned first-attempt failure"
        elif status == "failed" and e[3] == "chaos.doomed":
            why = "failed: planned permanent failure"
        elif status in ("failed", "cancelled", "parked"):
            why = f"{status}: {category}"
        else:
            unexplained.append(f"execution {e[0]} job {e[1]} gen {e[2]}: attempt is {status}")
            continue
        explained[why] += 1
    report.violate("execution_unexplained", unexplained)
    report.counts["executions_not_succeeding_by_cause"] = dict(explained)
    report.counts["lost_attempts"] = sum(1 for a in attempts.values() if a[0] == "lost")
    report.counts["lost_attempts_without_execution"] = sum(
        1 for k, a in attempts.items() if a[0] == "lost" and k not in per_attempt
    )

    # 8. nothing before its due time (by the database's clock), nothing started at or after its
    # deadline; how far each worker's own clock was from the database's, as its log shows
    early = [
        f"execution {e[0]} job {e[1]} started {e[6].isoformat()} before due {e[7].isoformat()}"
        for e in executions
        if e[6] < e[7]
    ]
    early += [
        f"execution {e[0]} job {e[1]} started {e[6].isoformat()} before first due "
        f"{accepted[e[1]][2].isoformat()}"
        for e in executions
        if e[1] in accepted and e[6] < accepted[e[1]][2]
    ]
    report.violate("executed_before_due", early)
    report.counts["early_starts"] = len(early)
    offsets: dict[int, list[float]] = defaultdict(list)
    for e in executions:
        offsets[e[5]].append((e[8] - e[6]).total_seconds())
    report.counts["worker_clock_offsets_s"] = {
        str(pid): round(sorted(v)[len(v) // 2], 1)
        for pid, v in offsets.items()
        if abs(sorted(v)[len(v) // 2]) >= 1.0
    }
    report.counts["executions_by_skewed_worker"] = {
        pid: len(offsets[int(pid)]) for pid in report.counts["worker_clock_offsets_s"]
    }
    late_starts = []
    for (job_id, generation), attempt in attempts.items():
        owner = jobs.get(job_id)
        if owner is not None and owner[5] is not None and attempt[2] >= owner[5]:
            late_starts.append(
                f"job {job_id} gen {generation} started {attempt[2]} >= deadline {owner[5]}"
            )
    report.violate("started_after_deadline", late_starts)
    report.counts["jobs_with_deadline"] = sum(1 for j in jobs.values() if j[5] is not None)

    _check_dependencies(conn, report, jobs, executions)
    _check_sequences(conn, report)
    return report


ENDED = ("succeeded", "dead", "cancelled", "expired")


@dataclass(frozen=True)
class SeqJob:
    """A job of a sequence as the checker judges it: its key, status, and the instant of its
    last change (updated_at: for an ended job, the instant it ended; a dismissed hold's, its
    dismissal)."""

    id: int
    key: str
    status: str
    updated_at: datetime


@dataclass(frozen=True)
class SeqAttempt:
    """An attempt of a job of a sequence: when its handler began, by the database's clock
    (executed_at: its execution's db_started_at; None when it never logged one: it ran no
    handler code), and the store's instants of its claim (started_at), finish (finished_at)
    and lease's end (lease_expires_at)."""

    job_id: int
    generation: int
    status: str
    started_at: datetime
    finished_at: datetime | None
    lease_expires_at: datetime
    executed_at: datetime | None = None

    @property
    def ended_at(self) -> datetime:
        """Until when it counts as running: a lost attempt (its worker killed, paused or cut
        off) until its lease's end, since its worker may still be executing until then and is
        fenced only after (docs/fencing.md); one still running at check time too; any other
        until its finish was recorded."""
        if self.status in ("lost", "running") or self.finished_at is None:
            return max(self.lease_expires_at, self.finished_at or self.lease_expires_at)
        return self.finished_at


@dataclass
class SequenceVerdict:
    not_ended: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    not_executed: int = 0  # attempts that ran no handler code: nothing of theirs to judge
    # attempts whose claim's instant (started_at) is before the end of a job before them,
    # though their handler began after it: the claim's `now` was taken before the claim ran
    # (it waited for a store thread or a connection), not a violation; counted, with the
    # largest gap in seconds
    claim_stamped_early: int = 0
    claim_stamped_early_max_s: float = 0.0


def judge_sequences(jobs: Sequence[SeqJob], attempts: Sequence[SeqAttempt]) -> SequenceVerdict:
    """Judge the sequences (docs/chaos.md, "Sequences"), per key, in enqueue order (ids):

    * not ended: a job of a sequence is not succeeded, dead, cancelled or expired;
    * out of order: an attempt of a job began (executed_at) before a job of its key enqueued
      earlier had ended: that job not ended at all, or its end (the latest of its updated_at
      and its attempts' ends, SeqAttempt.ended_at) after the start;
    * overlap: two attempts of one key's jobs (two generations of one job included) whose
      spans [executed_at, ended_at) intersect (a zombie that began only after its lease's end
      has an empty span: fencing voids whatever it does).

    A start is the database's own instant (clock_timestamp() as the handler logged it); an
    end is an instant the store stamped by a worker's corrected clock, a lower bound of the
    true one: a violation found is a real one. The claim's stamp (started_at) is not used as
    a start: it is taken before the claim waits for a thread and a connection, so it can
    precede the end the claim saw committed (claim_stamped_early counts these)."""
    verdict = SequenceVerdict()
    by_job: dict[int, list[SeqAttempt]] = defaultdict(list)
    for a in attempts:
        by_job[a.job_id].append(a)
    by_key: dict[str, list[SeqJob]] = defaultdict(list)
    for j in jobs:
        by_key[j.key].append(j)
        if j.status not in ENDED:
            verdict.not_ended.append(f"job {j.id} of sequence {j.key} is {j.status}")
    for key, members in by_key.items():
        members.sort(key=lambda j: j.id)
        # the latest end so far among the earlier jobs, and which; None: one has not ended
        ended_by: tuple[datetime, int] | None = None
        open_before: int | None = None
        spans: list[tuple[datetime, datetime, int, int]] = []
        for j in members:
            mine = sorted(by_job.get(j.id, []), key=lambda a: a.started_at)
            for a in mine:
                if ended_by is not None and a.started_at < ended_by[0]:
                    verdict.claim_stamped_early += 1
                    gap = (ended_by[0] - a.started_at).total_seconds()
                    verdict.claim_stamped_early_max_s = max(verdict.claim_stamped_early_max_s, gap)
                began = a.executed_at
                if began is None:
                    verdict.not_executed += 1
                    continue
                if began < a.ended_at:
                    spans.append((began, a.ended_at, j.id, a.generation))
                if open_before is not None:
                    verdict.out_of_order.append(
                        f"sequence {key}: job {j.id} gen {a.generation} began {began}"
                        f" while earlier job {open_before} never ended"
                    )
                elif ended_by is not None and began < ended_by[0]:
                    verdict.out_of_order.append(
                        f"sequence {key}: job {j.id} gen {a.generation} began {began}"
                        f" before earlier job {ended_by[1]} ended at {ended_by[0]}"
                    )
            if j.status not in ENDED:
                open_before = open_before if open_before is not None else j.id
                continue
            end = max([j.updated_at, *(a.ended_at for a in mine)])
            if ended_by is None or end > ended_by[0]:
                ended_by = (end, j.id)
        spans.sort()
        latest: tuple[datetime, int, int] | None = None  # the latest end so far, whose
        for start, end, job_id, generation in spans:
            if latest is not None and start < latest[0]:
                verdict.overlaps.append(
                    f"sequence {key}: job {job_id} gen {generation} began {start} while job"
                    f" {latest[1]} gen {latest[2]} ran until {latest[0]}"
                )
            if latest is None or end > latest[0]:
                latest = (end, job_id, generation)
    return verdict


def _check_sequences(conn: psycopg.Connection[Any], report: Report) -> None:
    """10. sequences (docs/workflows.md; the --sequences run), by judge_sequences. Nothing to
    judge without jobs in sequences."""
    jobs = [
        SeqJob(int(r[0]), str(r[1]), str(r[2]), r[3])
        for r in _rows(
            conn,
            "SELECT id, sequence_key, status, updated_at FROM duetime_all_jobs"
            " WHERE sequence_key IS NOT NULL",
        )
    ]
    if not jobs:
        return
    attempts = [
        SeqAttempt(int(r[0]), int(r[1]), str(r[2]), r[3], r[4], r[5], r[6])
        for r in _rows(
            conn,
            "SELECT a.job_id, a.generation, a.status, a.started_at, a.finished_at,"
            " a.lease_expires_at, (SELECT min(e.db_started_at) FROM chaos_executions e"
            " WHERE e.job_id = a.job_id AND e.generation = a.generation)"
            " FROM duetime_all_attempts a JOIN duetime_all_jobs j ON j.id = a.job_id"
            " WHERE j.sequence_key IS NOT NULL",
        )
    ]
    verdict = judge_sequences(jobs, attempts)
    report.violate("sequence_job_not_ended", verdict.not_ended)
    report.violate("sequence_order_broken", verdict.out_of_order)
    report.violate("sequence_overlap", verdict.overlaps)
    report.counts["sequence_keys"] = len({j.key for j in jobs})
    report.counts["sequence_jobs"] = len(jobs)
    report.counts["sequence_jobs_by_status"] = dict(Counter(j.status for j in jobs))
    report.counts["sequence_attempts"] = len(attempts)
    report.counts["sequence_attempts_by_status"] = dict(Counter(a.status for a in attempts))
    report.counts["sequence_jobs_lost"] = len(verdict.not_ended)
    report.counts["sequence_order_violations"] = len(verdict.out_of_order)
    report.counts["sequence_overlaps"] = len(verdict.overlaps)
    report.counts["sequence_attempts_not_executed"] = verdict.not_executed
    report.counts["sequence_claims_stamped_before_the_previous_end"] = verdict.claim_stamped_early
    report.counts["sequence_claim_stamp_early_max_s"] = round(verdict.claim_stamped_early_max_s, 3)


FAILED = ("dead", "cancelled", "expired")


def _check_dependencies(
    conn: psycopg.Connection[Any],
    report: Report,
    jobs: dict[int, tuple[Any, ...]],
    executions: list[tuple[Any, ...]],
) -> None:
    """9. dependencies (docs/workflows.md; the --dependencies run): a child never starts before
    all its parents ended as it needs (succeeded, or any end with on_parent_failure "run"),
    judged on the database's clock: its first execution after each parent's effect was applied
    (in the parent's success transaction, before its commit released the child) and after each
    parent's last execution began; a released child has every link told;
    a child whose parent failed is cancelled, never ran, and its reason names a failed parent
    (the cascade), unless it runs anyway ("run"); a child whose parents all succeeded is never
    cancelled by them; each link holds the status its parent ended in. A release lost leaves
    the child blocked: check 1 counts it (job_not_terminal). Nothing to judge without links."""
    links = _rows(conn, "SELECT child_id, parent_id, outcome FROM duetime_job_parents")
    if not links:
        return
    children = {
        r[0]: r
        for r in _rows(
            conn,
            "SELECT id, on_parent_failure, cancel_reason, parents_left, status, generation "
            "FROM duetime_all_jobs WHERE on_parent_failure IS NOT NULL",
        )
    }
    applied = dict(_rows(conn, "SELECT job_id, max(applied_at) FROM chaos_effects GROUP BY 1"))
    # a job's first execution, and when each of its generations began (a paused worker may log
    # a stale generation's start late, after a newer one ended the job: only a job's last
    # generation bounds its end from below)
    first_start: dict[int, Any] = {}
    began: dict[tuple[int, int], Any] = {}
    for e in executions:
        job_id, at = e[1], e[6]
        if job_id not in first_start or at < first_start[job_id]:
            first_start[job_id] = at
        began[(job_id, e[2])] = max(at, began.get((job_id, e[2]), at))
    parents_of: dict[int, list[tuple[int, str | None]]] = defaultdict(list)
    for child_id, parent_id, outcome in links:
        parents_of[child_id].append((parent_id, outcome))

    early: list[str] = []
    untold: list[str] = []
    cascade: list[str] = []
    wrong_outcome: list[str] = []
    released = cancelled_by_parent = ran_anyway = 0
    for child_id, parents in parents_of.items():
        child = children.get(child_id)
        if child is None:
            continue  # pruned: nothing to judge
        policy, reason, status, generation = child[1], child[2], child[4], child[5]
        for parent_id, outcome in parents:
            parent = jobs.get(parent_id)
            if parent is not None and parent[2] in TERMINAL and outcome != parent[2]:
                wrong_outcome.append(f"link {child_id}<-{parent_id}: {outcome}, parent {parent[2]}")
        failed = sorted((p, o) for p, o in parents if o in FAILED)
        started = first_start.get(child_id)
        if started is not None or generation > 0:
            released += 1
            if any(o is None for _, o in parents):
                untold.append(f"job {child_id} ran with a parent's end untold: links {parents}")
            if policy == "cancel" and failed:
                cascade.append(f"job {child_id} ran though parents {failed} failed")
            if failed:
                ran_anyway += 1
            for parent_id, _ in parents:
                last = int(jobs[parent_id][3]) if parent_id in jobs else -1
                ends = (applied.get(parent_id), began.get((parent_id, last)))
                bounds = [b for b in ends if b is not None]
                if started is not None and any(started < b for b in bounds):
                    early.append(
                        f"job {child_id} started {started} before parent {parent_id} ended "
                        f"(its effect, or its last generation's start, at {max(bounds)})"
                    )
        elif policy == "cancel" and failed:
            cancelled_by_parent += 1
            named = {f"parent job {p} ended {o}" for p, o in failed}
            if status != "cancelled" or reason not in named:
                cascade.append(
                    f"job {child_id} is {status} ({reason!r}) but parents {failed} failed"
                )
        if not failed and reason is not None and reason.startswith("parent job"):
            cascade.append(f"job {child_id} cancelled ({reason}) though no parent failed")
    report.violate("child_started_before_parents_ended", early)
    report.violate("child_released_with_a_parent_untold", untold)
    report.violate("cascade_wrong", cascade)
    report.violate("link_outcome_wrong", wrong_outcome)
    report.counts["dependency_links"] = len(links)
    report.counts["children"] = len(parents_of)
    report.counts["children_released"] = released
    report.counts["children_run_after_a_failed_parent"] = ran_anyway
    report.counts["children_cancelled_by_a_parent"] = cancelled_by_parent
    report.counts["children_released_early"] = len(early)


def pid_of(worker_id: str) -> int | None:
    """The pid in a default worker id (host:pid:suffix)."""
    parts = worker_id.split(":")
    if len(parts) >= 3 and parts[-2].isdigit():
        return int(parts[-2])
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m duetime.chaos.checker", description="judge a chaos run's history"
    )
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = check(args.database_url)
    if args.json:
        sys.stdout.write(json.dumps(report.as_dict(), indent=2, default=str) + "\n")
    else:
        sys.stdout.write(report.text() + "\n")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

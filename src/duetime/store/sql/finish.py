"""The SQL store's finish part: leases renewed, attempts finished (alone, in batches, or in
the handler's own transaction), the reaper's reads and expiries, and the pruning of ended jobs.

A finish is fenced: the jobs' rows are locked in id order, and the generation, the claim token
(the fence: docs/at-least-once.md) and the status the move starts from are checked under the
locks, by lock_jobs and again by finish_jobs, or (PostgreSQL, a batch whose attempts all still
hold their jobs) by finish_jobs alone; a refused report is recorded as a late report, and never
holds up the others of its batch. An ended attempt counts on its job's limits per dependency
(the limits part's count_outcomes, in the same transaction).

Why one module of some 450 lines: every way an attempt ends (a worker's batch, the one-statement
batch, a completion, the reaper's expiries) shares that fence (_fence_holds, finish_jobs) and
what follows a move (_after_moves); split, the halves would reach into each other's helpers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from duetime.core.errors import StaleAttempt, StoreError
from duetime.core.models import ExpiredLease, Lease, LeaseState, Outcome
from duetime.core.outbox import DISPATCH_HOLDER
from duetime.core.retry import ErrorCategory
from duetime.core.states import (
    ATTEMPT_END,
    TERMINAL,
    AttemptStatus,
    Event,
    JobStatus,
    next_status,
)
from duetime.store.driver import Connection, Driver, Row, Rows
from duetime.store.rows import moves_json
from duetime.store.sql.dependencies import Dependencies
from duetime.store.sql.limits import Limits
from duetime.store.sql.shared import Part, conflicts_retried, earliest_of, settle_sequences

log = logging.getLogger("duetime.store")


class _Fenced(Exception):
    """Raised inside a completion transaction to roll it back."""


class _Unmatched(StoreError):
    """The finish ended fewer attempts than the checks under the row locks said it would: the
    transaction is rolled back (finish_many then tries each outcome alone)."""


def _fence_holds(job: Row, lease: Lease) -> bool:
    """The locked job (with its current attempt, lock_jobs) is still held by `lease`: the same
    generation and claim token, and its attempt of that token is running. A lease without a
    claim token (a worker of an earlier version) never holds."""
    return (
        lease.claim_token is not None
        and job["generation"] == lease.generation
        and job["claim_token"] == lease.claim_token
        and job["attempt_status"] == AttemptStatus.RUNNING
    )


class Finisher(Part):
    def __init__(self, driver: Driver, limits: Limits, dependencies: Dependencies) -> None:
        super().__init__(driver)
        self.limits = limits
        self.dependencies = dependencies

    @conflicts_retried
    def heartbeat(self, leases: Sequence[Lease], now: datetime) -> list[LeaseState]:
        if not leases:
            return []
        # each lease found by its job and claim token, never by its attempt id alone
        held = Rows(
            {"job_id": lease.job_id, "claim_token": lease.claim_token}
            for lease in leases
            if lease.claim_token is not None
        )
        rows = {}
        if held:
            with self.driver.transaction() as c:
                c.run("renew_leases", leases=held, now=now)
                rows = {
                    (r["job_id"], r["claim_token"]): r for r in c.rows("lease_states", leases=held)
                }
        states = []
        for lease in leases:
            row = rows.get((lease.job_id, lease.claim_token))
            if row is None or (row["attempt_id"], row["generation"]) != (
                lease.attempt_id,
                lease.generation,
            ):
                states.append(LeaseState(lease, held=False))
            else:
                states.append(
                    LeaseState(
                        lease,
                        held=True,
                        cancel_requested=row["job_status"] == JobStatus.CANCEL_REQUESTED,
                        lease_expires_at=self._t(row["lease_expires_at"]),
                    )
                )
        return states

    def finish(
        self, lease: Lease, outcome: Outcome, now: datetime, *, only_if_expired: bool = False
    ) -> bool:
        return self.finish_many([(lease, outcome)], now, only_if_expired=only_if_expired)[0]

    @conflicts_retried
    def finish_many(
        self,
        items: Sequence[tuple[Lease, Outcome]],
        now: datetime | Callable[[], datetime],
        *,
        only_if_expired: bool = False,
    ) -> list[bool]:
        if not items:
            return []
        try:
            return self._finish_batch(items, now, only_if_expired)
        except _Unmatched:
            pass
        # a batch in which the store did not end what the checks under the locks said it
        # would: each outcome alone, so that the one that cannot be kept does not hold up the
        # others (a refused outcome never wedges a batch)
        applied = []
        for item in items:
            try:
                applied += self._finish_batch([item], now, only_if_expired)
            except _Unmatched as exc:
                log.warning(
                    "the outcome for job %s was not kept (%s); the batch's others were",
                    item[0].job_id,
                    exc,
                )
                applied.append(False)
        return applied

    def _finish_batch(
        self,
        items: Sequence[tuple[Lease, Outcome]],
        now: datetime | Callable[[], datetime],
        only_if_expired: bool,
    ) -> list[bool]:
        if self.driver.finishes_held and not only_if_expired:
            applied = self._finish_held(items, now)
            if applied is not None:
                return applied
        with self.driver.transaction() as c:
            applied, at = self.finish_on(c, items, now, only_if_expired)
            refused = [item for item, ok in zip(items, applied, strict=True) if not ok]
            if refused and not only_if_expired:
                c.run("late_reports", batch=Rows(_late_report(*item) for item in refused), now=at)
        return applied

    def _finish_held(
        self, items: Sequence[tuple[Lease, Outcome]], when: datetime | Callable[[], datetime]
    ) -> list[bool] | None:
        """A worker's batch as its worker sees it (every attempt still holds its running job):
        one statement locks, fences and moves the jobs (finish_held, finish_jobs with `whole`:
        all of them or none), with no read of their rows first, and answers in one row: how
        many moved, and those the rest of the finish acts on (_after_moves: a parent, a job of
        a sequence, a retry), not a row for each job. None when the batch is not all of that:
        nothing was written, and finish_on takes it in a transaction of its own (a stale
        attempt, a job whose cancel was asked meanwhile, two outcomes of one job). The instant
        recorded is read before the statement, so a wait for a row lock held by another short
        transaction (a renewal, a progress report, an operator's cancel) is not in it."""
        targets = []
        for lease, outcome in items:
            target = next_status(outcome.event, JobStatus.RUNNING)
            if target is None or lease.claim_token is None:
                return None
            targets.append(target)
        if len({lease.job_id for lease, _ in items}) != len(items):
            return None
        with self.driver.transaction() as c:
            now = when() if callable(when) else when
            moves = Rows(
                _move(lease, outcome, JobStatus.RUNNING, target, now, False)
                for (lease, outcome), target in zip(items, targets, strict=True)
            )
            [answer] = c.rows("finish_held", batch=moves, now=now, whole=True)
            moved = answer["moved"]
            if not moved:
                return None  # nothing written; the commit lets the row locks go
            if moved != len(moves):  # `whole` makes this impossible: refuse to guess
                raise _Unmatched(f"finished {moved} of the {len(moves)} jobs; nothing kept")
            applied = [True] * len(items)
            follow = {
                job_id: dict(zip(_FOLLOWED, rest, strict=True))
                for job_id, *rest in json.loads(answer["follow_ups"] or "[]")
            }
            self._after_moves(c, items, applied, moves, follow, now)
        return applied

    def finish_on(
        self,
        c: Connection,
        items: Sequence[tuple[Lease, Outcome]],
        when: datetime | Callable[[], datetime],
        only_if_expired: bool = False,
    ) -> tuple[list[bool], datetime]:
        """The fenced finish of a batch, in the caller's transaction; which items applied, and
        the instant recorded (`when`, or what `when()` says once the rows are locked).

        The jobs' rows are locked first, in id order (every writer locks a job before its
        attempt, and batches in id order cannot deadlock each other), each read with its
        current attempt. What applies is read under those locks, and the update re-checks it
        in its own WHERE: the generation and the claim token (the fence: the job and its
        attempt are found by the claim token, never by the attempt id alone), the status the
        move starts from, the attempt still running, and for a reap the expired lease. An
        outcome that does not hold is refused, the others apply.
        """
        job_ids = sorted({lease.job_id for lease, _ in items})
        locked = c.rows("lock_jobs", ids=job_ids)
        now = when() if callable(when) else when  # after the wait for the locks
        jobs = {r["id"]: r for r in locked}
        applied: list[bool] = []
        moves = Rows()
        moved: dict[int, Row] = {}  # the locked rows of the jobs that move
        for lease, outcome in items:
            # a batch may hold a stale attempt's outcome beside the current one's (a worker
            # whose earlier attempt was reaped ran the job again): each is checked against the
            # job's fence; the one that applies takes the job, so at most one per job applies
            job = jobs.get(lease.job_id)
            target = status = None
            if job is not None and _fence_holds(job, lease):
                status = JobStatus(job["status"])
                target = next_status(outcome.event, status)
            if (
                target is not None
                and only_if_expired
                and self._t(job["attempt_lease_expires_at"]) > now  # type: ignore[index]
            ):
                target = None
            applied.append(target is not None)
            if status is None or target is None:
                continue
            moved[lease.job_id] = jobs.pop(lease.job_id)
            moves.append(_move(lease, outcome, status, target, now, only_if_expired))
        if moves:
            ended = c.run("finish_jobs", batch=moves, now=now, whole=False)
            if ended != len(moves):  # the row locks make this impossible: refuse to guess
                raise _Unmatched(f"finished {ended} of the {len(moves)} jobs locked; nothing kept")
            self._after_moves(c, items, applied, moves, moved, now)
        return applied, now

    def _after_moves(
        self,
        c: Connection,
        items: Sequence[tuple[Lease, Outcome]],
        applied: Sequence[bool],
        moves: Sequence[dict[str, Any]],
        moved: Mapping[int, Row],
        now: datetime,
    ) -> None:
        """The rest of a finish, in its transaction, once `moves` moved their jobs: results and
        progress kept, limits counted, children told, sequences and retries woken. `moved`:
        by job id, its row's has_children, tenant, sequence_key and queue (_FOLLOWED), of every
        job that moved or at least of those that ended with children, in a sequence, or are
        to be retried (finish_held's answer)."""
        carrying = [  # the outcomes that carry a result or progress: most carry neither
            (lease, outcome)
            for (lease, outcome), ok in zip(items, applied, strict=True)
            if ok and (outcome.result is not None or outcome.progress is not None)
        ]
        if carrying:  # under the locks taken above, fenced as the finish was
            by_job = {m["job_id"]: m for m in moves}
            for lease, outcome in carrying:
                c.run("keep_results", **_extras(by_job[lease.job_id], outcome), now=now)
        self.limits.count_outcomes(c, _outcomes(items, applied), now)
        ended = [m for m in moves if m["to_status"] in TERMINAL]  # statuses are str enums
        # finish_held tells only of the jobs whose end these lines act on (its filter): a job
        # that ended and is not in `moved` has no children and no sequence; a retry always is
        ended_rows = [(m, row) for m in ended if (row := moved.get(m["job_id"])) is not None]
        tell = [
            (m["job_id"], JobStatus(m["to_status"])) for m, row in ended_rows if row["has_children"]
        ]
        if tell:  # their blocked children released or cancelled, in this transaction
            self.dependencies.settle(c, tell, now)
        ended_keys = [
            (row["tenant"], row["sequence_key"]) for _, row in ended_rows if row["sequence_key"]
        ]
        if ended_keys:  # jobs of a sequence: one that ended lets the next run
            self.driver.notify(c, settle_sequences(c, ended_keys, now, self._t))
        again = [m for m in moves if m["to_status"] == JobStatus.SCHEDULED]
        if again:  # retries: due again later (the queue is the job's)
            self.driver.notify(
                c, earliest_of((moved[m["job_id"]]["queue"], m.get("due_at") or now) for m in again)
            )

    @conflicts_retried
    def record_progress(
        self, reports: Sequence[tuple[Lease, float, str | None]], now: datetime
    ) -> list[bool]:
        """Each running attempt's progress, fenced by its generation and claim token: which
        were written (an attempt that no longer holds its job writes nothing; MariaDB/MySQL
        count a write of the values the row holds already as none)."""
        if not reports:
            return []
        order = sorted(range(len(reports)), key=lambda i: reports[i][0].job_id)
        written = [False] * len(reports)
        with self.driver.transaction() as c:
            for i in order:  # in id order, as every writer of several jobs locks them
                lease, fraction, message = reports[i]
                written[i] = (
                    c.run(
                        "record_progress",
                        job_id=lease.job_id,
                        generation=lease.generation,
                        claim_token=lease.claim_token,
                        progress=fraction,
                        progress_message=message,
                        now=now,
                    )
                    == 1
                )
        return written

    @contextmanager
    def completion(
        self, lease: Lease, outcome: Outcome, now: Callable[[], datetime]
    ) -> Iterator[Any]:
        """Keep the block short: the job's row (SQLite: the whole file) stays locked."""
        try:
            with self.driver.transaction() as c:
                yield c.native  # the handler's own writes, in this transaction
                if not self.finish_on(c, [(lease, outcome)], now)[0][0]:
                    raise _Fenced  # rolls the handler's writes back too
        except _Fenced:
            pass
        else:
            return
        self.finish(lease, outcome, now())  # records the late report
        raise StaleAttempt(lease.job_id, lease.generation)

    @conflicts_retried
    def prune(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` jobs that ended before `before`: from the jobs table, then from
        the history table (migration 25) as many as the limit leaves."""
        with self.driver.transaction() as c:
            pruned = c.run("prune", before=before, limit=limit)
            if pruned < limit:
                pruned += c.run("prune_done", before=before, limit=limit - pruned)
            return pruned

    def expired_leases(self, now: datetime, limit: int) -> list[ExpiredLease]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("expired_leases", now=now, limit=limit, holder=DISPATCH_HOLDER)
        return [
            ExpiredLease(
                lease=Lease(r["job_id"], r["attempt_id"], r["generation"], r["claim_token"]),
                job_status=JobStatus(r["status"]),
                attempts=r["attempts"],
                max_attempts=r["max_attempts"],
                retry_base=float(r["retry_base"]),
                retry_cap=float(r["retry_cap"]),
            )
            for r in rows
        ]

    def held_leases(self, worker_id: str) -> list[Lease]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("held_leases", worker_id=worker_id)
        return [
            Lease(r["job_id"], r["attempt_id"], r["generation"], r["claim_token"]) for r in rows
        ]

    @conflicts_retried
    def expire_overdue(self, now: datetime, limit: int) -> int:
        with self.driver.transaction() as c:
            rows = c.rows("expire_overdue", moves=moves_json(Event.EXPIRE), now=now, limit=limit)
            parents = [r["id"] for r in rows if r["has_children"]]
            if parents:  # their children learn of it in this transaction (settle_ids locks
                # them again and tells only those not told yet: on MariaDB/MySQL the rows read
                # back may hold a job another expired at the same instant)
                self.dependencies.settle_ids(c, parents, now)
            keys = sorted({(r["tenant"], r["sequence_key"]) for r in rows if r["sequence_key"]})
            if keys:  # an expired job of a sequence lets the next run
                self.driver.notify(c, settle_sequences(c, keys, now, self._t))
        return len(rows)


def _move(
    lease: Lease,
    outcome: Outcome,
    status: JobStatus,
    target: JobStatus,
    now: datetime,
    only_if_expired: bool,
) -> dict[str, Any]:
    """One job's row of a finish batch (finish_jobs): its move from `status` to
    `target`, fenced by the lease, and its attempt's outcome. `kept`: a plain success (no
    error recorded; a reconciled one has its category) stays on its job's row, and writes no
    attempt row (migration 24: a succeeded job never moves again). A retry's due_at and the
    error texts are left out where they are None, as every dialect's statement reads a
    missing key as NULL: most rows are plain successes, and a third of their JSON was those
    nulls (docs/performance.md, "Claim rows in binary, and JSON parsed from text")."""
    ended = outcome.attempt_status or ATTEMPT_END[outcome.event]
    category, message, traceback = (
        outcome.error_category,
        outcome.error_message,
        outcome.error_traceback,
    )
    plain = not category and message is None and traceback is None  # no error recorded
    move: dict[str, Any] = {
        "job_id": lease.job_id,
        "generation": lease.generation,
        "claim_token": lease.claim_token,
        "from_status": str(status),
        "to_status": str(target),
        "only_if_expired": only_if_expired,
        "status": str(ended),
        "kept": plain and ended is AttemptStatus.SUCCEEDED and target is JobStatus.SUCCEEDED,
    }
    if outcome.due_at is not None:
        move["due_at"] = _delay_from(outcome, now)
    if category:
        move["error_category"] = str(category)
    if message is not None:
        move["error_message"] = storable(message)
    if traceback is not None:
        move["error_traceback"] = storable(traceback)
    return move


def _extras(move: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
    """The keep_results parameters of a finish's move whose outcome carries a result or
    progress (a result is kept only with a success: core/states.py)."""
    return {
        "job_id": move["job_id"],
        "generation": move["generation"],
        "claim_token": move["claim_token"],
        "to_status": move["to_status"],
        "result": outcome.result if outcome.event is Event.SUCCEED else None,
        "progress": outcome.progress,
        "progress_message": outcome.progress_message if outcome.progress is not None else None,
    }


def _delay_from(outcome: Outcome, now: datetime) -> datetime | None:
    """A retry's due time, its delay counted from `now`, the instant recorded (the delay is
    due_at - decided_at; an outcome without decided_at is due when it says)."""
    due, decided = outcome.due_at, outcome.decided_at
    if due is None or decided is None or now <= decided:
        return due
    return due + (now - decided)


def _outcomes(items: Sequence[tuple[Lease, Outcome]], applied: Sequence[bool]) -> dict[int, bool]:
    """The attempts that ended and count for limits (docs/flow-control.md): job id -> failed.
    A shutdown's interruption, a cancellation or a reconciliation says nothing about the
    dependency and is left out."""
    found = {}
    for (lease, outcome), ok in zip(items, applied, strict=False):
        if not ok or outcome.error_category in _NOT_COUNTED:
            continue
        if outcome.event is Event.SUCCEED:
            found[lease.job_id] = False
        elif outcome.event in (Event.RETRY, Event.GIVE_UP):
            found[lease.job_id] = True
    return found


# what the rest of a finish reads of a job that moved (_after_moves), in the order of
# finish_held's follow_ups (each after the job's id)
_FOLLOWED = ("has_children", "tenant", "sequence_key", "queue")
_NOT_COUNTED = (ErrorCategory.INTERRUPTED, ErrorCategory.CANCELLED, ErrorCategory.RECONCILED)


def _late_report(lease: Lease, outcome: Outcome) -> dict[str, object]:
    return {
        "job_id": lease.job_id,
        "generation": lease.generation,
        "claim_token": lease.claim_token,
        "outcome": str(outcome.attempt_status or ATTEMPT_END[outcome.event]),
    }


def storable(text: str | None) -> str | None:
    """Error text as every dialect can store it: no NUL, no unpaired surrogate (a handler's
    exception message may hold either; its outcome must still be recorded)."""
    if text is None:
        return None
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")

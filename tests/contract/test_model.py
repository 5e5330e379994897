"""A model of the job store: random interleavings of every job operation, on each store.

A hypothesis RuleBasedStateMachine drives a ManualClock and the store's job API: enqueue, claim,
heartbeat, finish (succeed, retry, give up, stop, park; with live and stale leases, and the
reaper's only_if_expired write), the Reaper, the operator's moves (cancel, reschedule, replay,
resolve) and expire_overdue. An in-memory model predicts every answer from
core.states.TRANSITIONS, the Store docstrings and docs/state-machine.md; after every step the
whole database (jobs, attempt histories, reapable leases) is compared with the model.

- Every example starts from an empty database and at most a handful of jobs, so that each job
  goes through many moves (claim, cancel, retry, replay, claim again...); a few rules pick a
  held or ended job on purpose, and the clock can jump exactly to the next due time, deadline
  or lease end, so that the <= / < boundaries are met.
- The reaper's jitter comes from a Random whose uniform() is a chosen fraction of its range,
  so even the retry due time it writes is predicted to the microsecond.
- The only thing learned from the store: which overdue jobs expire_overdue takes first when
  its limit is smaller than their number (not specified).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from duetime.core.clock import ManualClock
from duetime.core.errors import IllegalTransition, InvalidRequest, JobNotFound
from duetime.core.models import Job, JobFilter, Lease, LeaseState, Outcome
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.core.retry import ErrorCategory
from duetime.core.states import (
    ATTEMPT_END,
    HELD,
    TERMINAL,
    TRANSITIONS,
    AttemptStatus,
    Event,
    JobStatus,
)
from duetime.runtime.reaper import Reaper
from duetime.store.base import Store
from history import IN_BOTH
from jobhelpers import claim_one, enqueue
from kit import DialectKit

START = datetime(2026, 1, 1, tzinfo=UTC)
WORKERS = ["w1", "w2", "w3"]
QUEUES = ["a", "b"]
WORKER_EVENTS = [Event.SUCCEED, Event.RETRY, Event.GIVE_UP, Event.STOP, Event.PARK]
ERROR_OF = {
    Event.RETRY: ErrorCategory.RETRYABLE,
    Event.GIVE_UP: ErrorCategory.PERMANENT,
    Event.STOP: ErrorCategory.CANCELLED,
    Event.PARK: ErrorCategory.UNKNOWN_OUTCOME,
}
OPERATOR_EVENTS = [
    Event.CANCEL,
    Event.RESCHEDULE,
    Event.REPLAY,
    Event.RESOLVE_DONE,
    Event.RESOLVE_RETRY,
]
MAX_JOBS = 4  # few jobs, so that each one lives through many moves
RETRY_BASE, RETRY_CAP = 10.0, 3600.0  # RetryPolicy() defaults, which TaskDefaults uses

SETTINGS = settings(
    max_examples=30,
    stateful_step_count=200,
    deadline=None,
    # each example runs up to 200 steps against a real database; the swarm of enabled rules
    # sometimes leaves none that applies, which ends that example early (harmless)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


JOB_FIELDS = (
    "id",
    "status",
    "generation",
    "attempts",
    "version",
    "due_at",
    "deadline_at",
    "cancel_requested_at",
    "queue",
    "priority",
    "max_attempts",
    "lease_seconds",
    "created_at",
)
ATTEMPT_FIELDS = (
    "id",
    "generation",
    "worker_id",
    "status",
    "lease_expires_at",
    "started_at",
    "finished_at",
    "error_category",
    "late_outcome",
    "late_reported_at",
)


def view(record: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The named fields of a store record or of its model, for comparisons that diff well."""
    return {name: getattr(record, name) for name in names}


def same_job(job: Job, m: MJob) -> None:
    store, model = view(job, JOB_FIELDS), view(m, JOB_FIELDS)
    diff = {k: f"store {store[k]!r}, model {model[k]!r}" for k in store if store[k] != model[k]}
    assert not diff, f"job {m.id} differs: {diff}"


def lease_end(now: datetime, lease_seconds: float) -> datetime:
    """now + trunc(lease_seconds * 1e6) microseconds: how both stores compute a lease's end."""
    return now + timedelta(microseconds=int(lease_seconds * 1_000_000))


class FractionRandom(random.Random):
    """uniform(a, b) is always the same fraction of the way from a to b, so the model can predict
    the reaper's jittered backoff to the microsecond."""

    def __init__(self, fraction: float) -> None:
        super().__init__(0)
        self.fraction = fraction

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.fraction


# -- the model ----------------------------------------------------------------------------------


@dataclass
class MAttempt:
    id: int
    generation: int
    worker_id: str
    lease_expires_at: datetime
    started_at: datetime
    status: AttemptStatus = AttemptStatus.RUNNING
    finished_at: datetime | None = None
    error_category: ErrorCategory | None = None
    late_outcome: str | None = None
    late_reported_at: datetime | None = None
    claim_token: int | None = None  # the store's random one, as its claim returned it


@dataclass
class MJob:
    id: int
    queue: str
    priority: int
    due_at: datetime
    deadline_at: datetime | None
    max_attempts: int
    lease_seconds: float
    created_at: datetime
    status: JobStatus = JobStatus.SCHEDULED
    generation: int = 0
    attempts: int = 0
    version: int = 1
    cancel_requested_at: datetime | None = None
    history: list[MAttempt] = field(default_factory=list)

    def attempt(self, lease: Lease) -> MAttempt:
        [found] = [a for a in self.history if a.generation == lease.generation]
        assert found.id == lease.attempt_id
        return found

    def running_attempt(self) -> MAttempt | None:
        running = [a for a in self.history if a.status is AttemptStatus.RUNNING]
        assert len(running) <= 1
        return running[0] if running else None


# -- strategies ---------------------------------------------------------------------------------

# Durations come from a few round values half of the time, so that instants coincide (a lease
# ending, or a deadline falling, exactly at the clock's now) and every <= / < is exercised.
ROUND = [0, 1, 5, 10, 30]
seconds_0_60 = st.sampled_from(ROUND) | st.integers(0, 60)
job_specs = st.fixed_dictionaries(
    {
        "delay": seconds_0_60,
        "deadline_after": st.none() | st.sampled_from(ROUND[1:]) | st.integers(1, 60),
        "max_attempts": st.integers(1, 3),
        "lease_seconds": st.sampled_from([5.0, 10.0, 30.0, 7.3]) | st.integers(5, 30).map(float),
        "priority": st.integers(-1, 1),
        "queue": st.sampled_from(QUEUES),
    }
)
steps = st.sampled_from([*ROUND, 0.5, 0.000001]) | st.integers(0, 40).map(float)
queue_choices = st.sampled_from([None, ["a"], ["b"], ["a", "b"]])


# -- the machine --------------------------------------------------------------------------------


class StoreModel(RuleBasedStateMachine):
    """Bound to one store by a subclass (see machine_for); every example starts empty."""

    store: Store
    wipe: Callable[[], None]
    doubled: Callable[[], list[tuple[Any, ...]]]  # ids held by both tables (none may be)

    jobs = Bundle("jobs")
    leases = Bundle("leases")

    def __init__(self) -> None:
        super().__init__()
        self.wipe()
        # the model claims in strict priority order (store.claim: no claim policy); the lower
        # classes' share of saturated claims is checked in test_flow_priorities.py
        self.clock = ManualClock(START)
        self.model: dict[int, MJob] = {}
        self.frozen: dict[int, Job] = {}  # terminal jobs as first seen terminal

    @property
    def now(self) -> datetime:
        return self.clock.now()

    # -- time -----------------------------------------------------------------------------------

    @rule(seconds=steps)
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(which=st.sampled_from(["any", "deadline", "lease end"]))
    def advance_to_next_instant(self, which: str) -> None:
        """Jump exactly to the next due time, deadline or lease end (or the next of one kind,
        skipping the others), so that claims, expiry and reaping meet their boundaries."""
        now = self.now
        instants: dict[str, list[datetime]] = {"due": [], "deadline": [], "lease end": []}
        for m in self.model.values():
            if m.status is JobStatus.SCHEDULED:
                instants["due"].append(m.due_at)
                if m.deadline_at is not None:
                    instants["deadline"].append(m.deadline_at)
            attempt = m.running_attempt()
            if attempt is not None:
                instants["lease end"].append(attempt.lease_expires_at)
        kinds = list(instants) if which == "any" else [which]
        future = [t for kind in kinds for t in instants[kind] if t > now]
        if future:
            self.clock.set(min(future))

    # -- enqueue --------------------------------------------------------------------------------

    @initialize(target=jobs, specs=st.lists(job_specs, min_size=1, max_size=3))
    def start(self, specs: list[dict[str, Any]]) -> Any:
        missing = 10**9
        for event in OPERATOR_EVENTS:
            with pytest.raises(JobNotFound):
                self.store.transition(missing, event, self.now, due_at=self.now)
        return self.enqueue(specs)

    @precondition(lambda self: len(self.model) < MAX_JOBS)
    @rule(target=jobs, specs=st.lists(job_specs, min_size=1, max_size=3))
    def enqueue(self, specs: list[dict[str, Any]]) -> Any:
        now = self.now
        requests = []
        for s in specs:
            due = now + timedelta(seconds=s["delay"])
            deadline = None
            if s["deadline_after"] is not None:
                deadline = due + timedelta(seconds=s["deadline_after"])
            requests.append(
                build_new_job(
                    "t",
                    {},
                    now=now,
                    tenant="default",
                    defaults=TaskDefaults(lease_seconds=s["lease_seconds"]),
                    delay=s["delay"],
                    deadline=deadline,
                    priority=s["priority"],
                    queue=s["queue"],
                    max_attempts=s["max_attempts"],
                )
            )
        results = self.store.enqueue(requests, now)
        assert len(results) == len(requests)
        ids = [r.job.id for r in results]
        assert len(set(ids)) == len(ids) and not set(ids) & set(self.model)
        for request, result in zip(requests, results, strict=True):
            assert result.created
            m = MJob(
                id=result.job.id,
                queue=request.queue,
                priority=request.priority,
                due_at=request.due_at,
                deadline_at=request.deadline_at,
                max_attempts=request.max_attempts,
                lease_seconds=request.lease_seconds,
                created_at=now,
            )
            self.model[m.id] = m
            same_job(result.job, m)
        return multiple(*ids)

    # -- the worker's path ----------------------------------------------------------------------

    @rule(
        target=leases,
        worker=st.sampled_from(WORKERS),
        limit=st.sampled_from([1, 1, 2, 4, 0]),
        queues=queue_choices,
    )
    def claim(self, worker: str, limit: int, queues: list[str] | None) -> Any:
        now = self.now
        eligible = [
            m
            for m in self.model.values()
            if m.status is JobStatus.SCHEDULED
            and m.due_at <= now
            and (m.deadline_at is None or m.deadline_at > now)
            and (queues is None or m.queue in queues)
        ]
        eligible.sort(key=lambda m: (-m.priority, m.due_at, m.id))
        expected = [m.id for m in eligible[:limit]]
        claims = self.store.claim(worker_id=worker, queues=queues, limit=limit, now=now)
        assert [c.job.id for c in claims] == expected
        known_attempts = {a.id for m in self.model.values() for a in m.history}
        for c in claims:
            m = self.model[c.job.id]
            assert m.status in TRANSITIONS[Event.CLAIM]
            m.status = TRANSITIONS[Event.CLAIM][m.status]
            m.generation += 1
            m.attempts += 1
            assert c.attempt.id not in known_attempts
            attempt = MAttempt(
                id=c.attempt.id,
                generation=m.generation,
                claim_token=c.attempt.claim_token,
                worker_id=worker,
                lease_expires_at=lease_end(now, m.lease_seconds),
                started_at=now,
            )
            m.history.append(attempt)
            same_job(c.job, m)
            assert view(c.attempt, ATTEMPT_FIELDS) == view(attempt, ATTEMPT_FIELDS)
            assert c.lease == Lease(m.id, attempt.id, m.generation, attempt.claim_token)
        return multiple(*(c.lease for c in claims))

    @rule(chosen=st.lists(leases, min_size=1, max_size=3))
    def heartbeat(self, chosen: list[Lease]) -> None:
        now = self.now
        states = self.store.heartbeat(chosen, now)
        expected = []
        for lease in chosen:
            m = self.model[lease.job_id]
            attempt = m.attempt(lease)
            if attempt.status is AttemptStatus.RUNNING:
                assert m.status in HELD and attempt.generation == m.generation
                attempt.lease_expires_at = lease_end(now, m.lease_seconds)
                expected.append(
                    LeaseState(
                        lease,
                        held=True,
                        cancel_requested=m.status is JobStatus.CANCEL_REQUESTED,
                        lease_expires_at=attempt.lease_expires_at,
                    )
                )
            else:
                expected.append(LeaseState(lease, held=False))
        assert states == expected

    @rule(lease=leases, event=st.sampled_from(WORKER_EVENTS), delay=seconds_0_60)
    def finish(self, lease: Lease, event: Event, delay: int) -> None:
        """Any lease ever handed out, most of them stale by now."""
        self._finish(lease, self._outcome(event, delay))

    @precondition(lambda self: self._held())
    @rule(data=st.data(), event=st.sampled_from(WORKER_EVENTS), delay=seconds_0_60)
    def finish_held(self, data: st.DataObject, event: Event, delay: int) -> None:
        """A lease still held (a live worker reporting), so that jobs move on more often."""
        held = data.draw(st.sampled_from(self._held()), label="job")
        attempt = self.model[held].running_attempt()
        assert attempt is not None
        self._finish(
            Lease(held, attempt.id, attempt.generation, attempt.claim_token),
            self._outcome(event, delay),
        )

    @rule(lease=leases, event=st.sampled_from([Event.RETRY, Event.GIVE_UP]), delay=seconds_0_60)
    def finish_if_expired(self, lease: Lease, event: Event, delay: int) -> None:
        """A reaper's write, decided on an earlier look: it applies only if the lease is still
        expired (a renewal that lands first wins) and held by that generation."""
        outcome = replace(
            self._outcome(event, delay),
            error_category=ErrorCategory.LEASE_EXPIRED,
            attempt_status=AttemptStatus.LOST,
        )
        self._finish(lease, outcome, only_if_expired=True)

    def _outcome(self, event: Event, delay: int) -> Outcome:
        due_at = self.now + timedelta(seconds=delay) if event is Event.RETRY else None
        return Outcome(event, due_at=due_at, error_category=ERROR_OF.get(event))

    def _held(self) -> list[int]:
        return sorted(m.id for m in self.model.values() if m.status in HELD)

    def _finish(self, lease: Lease, outcome: Outcome, *, only_if_expired: bool = False) -> None:
        now = self.now
        m = self.model[lease.job_id]
        attempt = m.attempt(lease)
        assert set(TRANSITIONS[outcome.event]) <= HELD
        applies = lease.generation == m.generation and m.status in TRANSITIONS[outcome.event]
        if only_if_expired:
            applies = applies and attempt.lease_expires_at <= now
        ended_as = outcome.attempt_status or ATTEMPT_END[outcome.event]
        assert self.store.finish(lease, outcome, now, only_if_expired=only_if_expired) is applies
        if applies:
            m.status = TRANSITIONS[outcome.event][m.status]
            if outcome.due_at is not None:
                m.due_at = outcome.due_at
            attempt.status = ended_as
            attempt.finished_at = now
            attempt.error_category = outcome.error_category
        elif not only_if_expired:  # a worker's refused report is kept; a reaper's is not
            attempt.late_outcome = str(ended_as)
            attempt.late_reported_at = now

    @rule(fraction=st.sampled_from([0.0, 0.25, 1.0]))
    def reap(self, fraction: float) -> None:
        now = self.now
        reaped = 0
        for m in self.model.values():
            attempt = m.running_attempt()
            if attempt is None or attempt.lease_expires_at > now:
                continue
            assert m.status in HELD
            if m.attempts >= m.max_attempts:
                event, due_at = Event.GIVE_UP, None
            else:
                ceiling = min(RETRY_CAP, RETRY_BASE * 2.0 ** (m.attempts - 1))
                event, due_at = Event.RETRY, now + timedelta(seconds=ceiling * fraction)
            m.status = TRANSITIONS[event][m.status]
            if due_at is not None:
                m.due_at = due_at
            attempt.status = AttemptStatus.LOST
            attempt.finished_at = now
            attempt.error_category = ErrorCategory.LEASE_EXPIRED
            reaped += 1
        expired = self._expire_all(now)
        result = Reaper(self.store, self.clock, rng=FractionRandom(fraction), batch=1000).run_once()
        assert (result.reaped, result.expired) == (reaped, expired)

    def _overdue(self, now: datetime) -> list[MJob]:
        return [
            m
            for m in self.model.values()
            if m.status is JobStatus.SCHEDULED
            and m.deadline_at is not None
            and m.deadline_at <= now
        ]

    def _expire(self, m: MJob) -> None:
        m.status = TRANSITIONS[Event.EXPIRE][m.status]
        m.version += 1

    def _expire_all(self, now: datetime) -> int:
        overdue = self._overdue(now)
        for m in overdue:
            self._expire(m)
        return len(overdue)

    @rule(limit=st.sampled_from([1, 2, 100]))
    def expire_overdue(self, limit: int) -> None:
        now = self.now
        overdue = self._overdue(now)
        count = self.store.expire_overdue(now, limit)
        assert count == min(limit, len(overdue))
        # which ones go first when the limit bites is not specified: learn it from the store
        for m in overdue:
            job = self.store.get_job(m.id)
            assert job is not None
            assert job.status in (JobStatus.SCHEDULED, JobStatus.EXPIRED)
            if job.status is JobStatus.EXPIRED:
                self._expire(m)
                count -= 1
        assert count == 0

    # -- operators' moves -----------------------------------------------------------------------

    def _operator(
        self, job_id: int, event: Event, due_at: datetime | None, expect_due: datetime | None
    ) -> None:
        now = self.now
        m = self.model[job_id]
        allowed = m.status in TRANSITIONS[event]
        deadline_refusal = (
            event is Event.RESCHEDULE
            and allowed
            and m.deadline_at is not None
            and expect_due is not None
            and m.deadline_at <= expect_due
        )
        if not allowed or deadline_refusal:
            error = InvalidRequest if deadline_refusal else IllegalTransition
            with pytest.raises(error):
                self.store.transition(job_id, event, now, due_at=due_at)
            return
        new_status = TRANSITIONS[event][m.status]
        if new_status is JobStatus.CANCEL_REQUESTED and m.status is JobStatus.RUNNING:
            m.cancel_requested_at = now  # a new request is stamped now ...
        # ... and a repeated one keeps the first time (states.py, Event.CANCEL)
        m.status = new_status
        if event is Event.RESOLVE_RETRY and expect_due is None:
            expect_due = now  # "run again" is a replay: due now (docs/python-api.md)
        if expect_due is not None:
            m.due_at = expect_due
        if event in (Event.REPLAY, Event.RESOLVE_RETRY):
            m.attempts = 0
            m.cancel_requested_at = None  # a request belonged to the earlier run
            if m.deadline_at is not None and m.deadline_at <= m.due_at:
                m.deadline_at = None  # docs/state-machine.md, Replay
        m.version += 1
        job = self.store.transition(job_id, event, now, due_at=due_at)
        same_job(job, m)

    @rule(job_id=jobs, event=st.sampled_from(OPERATOR_EVENTS), delay=st.none() | seconds_0_60)
    def operate(self, job_id: int, event: Event, delay: int | None) -> None:
        """RESCHEDULE to now + delay (now if None); REPLAY likewise; the others take no due
        time, as the client passes none (a resolved job keeps its due time: it is past)."""
        due = None if delay is None else self.now + timedelta(seconds=delay)
        if event is Event.RESCHEDULE:
            self._operator(job_id, event, due or self.now, due or self.now)
        elif event is Event.REPLAY:
            self._operator(job_id, event, due, due or self.now)
        else:
            self._operator(job_id, event, None, None)

    @precondition(lambda self: self._held())
    @rule(data=st.data())
    def cancel_held(self, data: st.DataObject) -> None:
        """Cancel a running job: biased towards the rarer moves, as operate picks any job."""
        self._operator(
            data.draw(st.sampled_from(self._held()), label="job"), Event.CANCEL, None, None
        )

    def _parked(self) -> list[int]:
        return sorted(m.id for m in self.model.values() if m.status is JobStatus.PARKED)

    @precondition(lambda self: self._parked())
    @rule(data=st.data(), event=st.sampled_from([Event.RESOLVE_DONE, Event.RESOLVE_RETRY]))
    def resolve_parked(self, data: st.DataObject, event: Event) -> None:
        self._operator(data.draw(st.sampled_from(self._parked()), label="job"), event, None, None)

    def _ended(self) -> list[int]:
        return sorted(m.id for m in self.model.values() if m.status in TRANSITIONS[Event.REPLAY])

    @precondition(lambda self: self._ended())
    @rule(data=st.data(), delay=st.none() | seconds_0_60)
    def replay_ended(self, data: st.DataObject, delay: int | None) -> None:
        job_id = data.draw(st.sampled_from(self._ended()), label="job")
        due = None if delay is None else self.now + timedelta(seconds=delay)
        self._operator(job_id, Event.REPLAY, due, due or self.now)

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def store_matches_model(self) -> None:
        now = self.now
        reapable = {e.lease for e in self.store.expired_leases(now, 10_000)}
        expected_reapable = set()
        for m in self.model.values():
            attempt = m.running_attempt()
            if attempt is not None and attempt.lease_expires_at <= now:
                expected_reapable.add(
                    Lease(m.id, attempt.id, attempt.generation, attempt.claim_token)
                )
        assert reapable == expected_reapable
        listed = self.store.list_jobs(JobFilter(limit=10_000))
        assert sorted(j.id for j in listed) == sorted(self.model)
        assert self.doubled() == []  # a job is in the jobs table or the history table
        for listed_job in listed:
            m = self.model[listed_job.id]
            job = self.store.get_job(m.id)
            assert job is not None and job == listed_job
            same_job(job, m)
            assert [view(a, ATTEMPT_FIELDS) for a in job.attempt_history] == [
                view(a, ATTEMPT_FIELDS) for a in m.history
            ], f"attempts of job {m.id}"
            check_job_shape(job, now, reapable)
            if job.status in TERMINAL:  # terminal jobs never change, until a replay
                assert self.frozen.setdefault(job.id, job) == job
            else:
                self.frozen.pop(job.id, None)


def check_job_shape(job: Job, now: datetime, reapable: set[Lease]) -> None:
    """What holds for any job, whatever happened to it (checked on the store's own answers)."""
    generations = [a.generation for a in job.attempt_history]
    assert generations == list(range(1, job.generation + 1))
    running = [a for a in job.attempt_history if a.status is AttemptStatus.RUNNING]
    assert len(running) <= 1
    assert bool(running) == (job.status in HELD)
    if running:  # held by its newest attempt, under a lease still valid or up for reaping
        a = running[0]
        assert a.generation == job.generation
        assert a.lease_expires_at > now or (
            Lease(job.id, a.id, a.generation, a.claim_token) in reapable
        )
    assert 0 <= job.attempts <= job.generation
    assert job.version >= 1
    assert job.created_at <= job.updated_at <= now


# -- running it on each store -------------------------------------------------------------------


@pytest.fixture
def store_and_wipe(
    make_store: Callable[[], Store], kit: DialectKit, store_url: str, request: pytest.FixtureRequest
) -> tuple[Store, Callable[[], None], Callable[[], list[tuple[Any, ...]]]]:
    """One store, a function that empties its database (the fixture resets it per test), and
    one that reads the ids of jobs held by both tables."""
    store = make_store()
    tables = [
        "duetime_attempts",
        "duetime_ticks",
        "duetime_jobs_done",
        "duetime_jobs",
        "duetime_schedules",
    ]

    def clear() -> None:
        with closing(kit.connect(store_url)) as conn:
            cur = conn.cursor()
            for table in tables:
                cur.execute(f"DELETE FROM {table}")

    reader = kit.connect(store_url)  # one connection for the checks after every step
    request.addfinalizer(reader.close)

    def doubled() -> list[tuple[Any, ...]]:
        cur = reader.cursor()
        cur.execute(IN_BOTH)
        return [tuple(r) for r in cur.fetchall()]

    return store, clear, doubled


def machine_for(
    store: Store, clear: Callable[[], None], doubled: Callable[[], list[tuple[Any, ...]]]
) -> type[StoreModel]:
    name = "StoreModelOn" + store.dialect.title()
    binds = {"store": store, "wipe": staticmethod(clear), "doubled": staticmethod(doubled)}
    return type(name, (StoreModel,), binds)


def test_store_agrees_with_the_model(
    store_and_wipe: tuple[Store, Callable[[], None], Callable[[], list[tuple[Any, ...]]]],
) -> None:
    store, clear, doubled = store_and_wipe
    run_state_machine_as_test(machine_for(store, clear, doubled), settings=SETTINGS)


# -- discrepancies the model found, each as a plain test -----------------------------------------


def test_a_cancel_request_after_a_replay_is_stamped_with_its_own_time(
    store: Store, clock: ManualClock
) -> None:
    """A running job becomes cancel_requested "and cancel_requested_at is set"
    (docs/state-machine.md); a repeated request keeps the first time (states.py). Found by the
    model: the stores stamped with COALESCE(cancel_requested_at, now), so a request made in an
    earlier run of a replayed job was reported as the time of every later request."""
    job = enqueue(store, clock)
    _, lease = claim_one(store, clock)
    first = store.transition(job.id, Event.CANCEL, clock.now())
    assert first.cancel_requested_at == clock.now()
    assert store.finish(lease, Outcome(Event.STOP), clock.now())
    clock.advance(60)
    replayed = store.transition(job.id, Event.REPLAY, clock.now())
    assert replayed.cancel_requested_at is None  # a scheduled job has no request pending
    claim_one(store, clock)
    clock.advance(60)
    again = store.transition(job.id, Event.CANCEL, clock.now())
    assert again.status is JobStatus.CANCEL_REQUESTED
    assert again.cancel_requested_at == clock.now()  # was: the first run's request, 2 min ago
    clock.advance(5)
    repeated = store.transition(job.id, Event.CANCEL, clock.now())
    assert repeated.cancel_requested_at == again.cancel_requested_at


def test_a_parked_job_resolved_to_run_again_runs_even_past_its_deadline(
    store: Store, clock: ManualClock
) -> None:
    """docs/at-least-once.md: resolving a parked job with --run-again, "it becomes scheduled and
    runs now". Found while modelling resolve: when the job's deadline passed while it was parked
    (it waits for an operator, typically for longer than a deadline), the stores keep that
    deadline, so the job is never claimed and the next reaper run expires it. A replay clears
    such a deadline (docs/state-machine.md, Replay); resolve_retry does not."""
    job = enqueue(store, clock, deadline=clock.now() + timedelta(seconds=60))
    _, lease = claim_one(store, clock)
    assert store.finish(lease, Outcome(Event.PARK), clock.now())
    clock.advance(3600)
    resolved = store.transition(job.id, Event.RESOLVE_RETRY, clock.now())
    assert resolved.status is JobStatus.SCHEDULED
    claims = store.claim(worker_id="w", queues=None, limit=1, now=clock.now())
    assert [c.job.id for c in claims] == [job.id]  # the stores: [] (and the reaper expires it)

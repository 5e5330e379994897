"""Chains, groups and parent_results (docs/workflows.md, "Chains and groups"), on every dialect:
a handler reads its parents' results in one query; app.chain() and app.group() enqueue their
jobs, linked, in one transaction; a worker runs them in order, each step reading the results
of the steps it waited for."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import duetime
from duetime.core.clock import ManualClock
from duetime.core.errors import InvalidRequest
from duetime.core.models import Job, JobFilter, Outcome
from duetime.core.retry import ErrorCategory
from duetime.core.states import Event, JobStatus
from duetime.runtime.worker import Worker
from duetime.store.base import Store
from jobhelpers import enqueue, new, run_until

S = JobStatus


@pytest.fixture
def app(store_url: str, make_store: Callable[[], Store]) -> Iterator[duetime.App]:
    application = duetime.App(database_url=store_url)
    yield application
    application.close()


def _get(store: Store, job_id: int) -> Job:
    job = store.get_job(job_id)
    assert job is not None
    return job


def _end(store: Store, clock: ManualClock, job: Job, outcome: Outcome) -> None:
    claims = store.claim(worker_id="w", queues=None, limit=1, now=clock.now())
    assert [c.job.id for c in claims] == [job.id]  # the due job of the lowest id
    assert store.finish(claims[0].lease, outcome, clock.now())


# -- parent_results: the store's one read


def test_parent_results_hold_the_succeeded_parents_only(store: Store, clock: ManualClock) -> None:
    a, b, c, d = (enqueue(store, clock) for _ in range(4))
    child = enqueue(store, clock, depends_on=[a.id, b.id, c.id, d.id], on_parent_failure="run")
    _end(store, clock, a, Outcome(Event.SUCCEED, result='{"cents":1999,"ok":true}'))
    _end(store, clock, b, Outcome(Event.SUCCEED))  # returned nothing: maps to None
    failed = Outcome(Event.GIVE_UP, error_category=ErrorCategory.PERMANENT, error_message="no")
    _end(store, clock, c, failed)  # dead: absent
    store.transition(d.id, Event.CANCEL, clock.now())  # cancelled: absent
    assert _get(store, child.id).status is S.SCHEDULED
    assert store.parent_results(child.id) == {a.id: {"cents": 1999, "ok": True}, b.id: None}
    assert store.parent_results(a.id) == {}  # no parents


# -- the store's graph enqueue: one transaction


def test_a_graph_is_linked_by_positions_in_one_call(store: Store, clock: ManualClock) -> None:
    outside = enqueue(store, clock)
    jobs = [new(clock, depends_on=[outside.id]), new(clock, linked=True), new(clock, linked=True)]
    made = store.enqueue_graph(jobs, [[], [0], [0, 1]], clock.now())
    a, b, c = (_get(store, r.job.id) for r in made)
    assert [r.created for r in made] == [True, True, True]
    assert [p.id for p in a.parents] == [outside.id]
    assert [p.id for p in b.parents] == [a.id]
    assert [p.id for p in c.parents] == [a.id, b.id]
    assert {a.status, b.status, c.status} == {S.BLOCKED}
    assert b.on_parent_failure == "cancel"


def test_a_graph_that_fails_midway_leaves_nothing(store: Store, clock: ManualClock) -> None:
    """The second wave names a parent that does not exist: the first wave, already inserted
    in the same transaction, is rolled back with it."""
    jobs = [new(clock), new(clock, depends_on=[10**12], linked=True)]
    with pytest.raises(InvalidRequest, match="does not exist"):
        store.enqueue_graph(jobs, [[], [0]], clock.now())
    assert store.list_jobs(JobFilter()) == []


def test_a_graph_links_only_to_jobs_before(store: Store, clock: ManualClock) -> None:
    with pytest.raises(InvalidRequest, match="link to jobs before it"):
        store.enqueue_graph([new(clock), new(clock)], [[1], []], clock.now())
    with pytest.raises(InvalidRequest, match="one each"):
        store.enqueue_graph([new(clock)], [], clock.now())
    assert store.list_jobs(JobFilter()) == []


# -- the App: chain(), group(), their twins, and a worker running them


def test_a_chain_passes_each_result_to_the_next_step(app: duetime.App) -> None:
    seen: list[dict[int, Any]] = []

    @app.task(name="add")
    def add(n: int) -> int:
        before = duetime.current().parent_results
        seen.append(dict(before))
        return n + sum(before.values())

    first, second, third = app.chain(
        duetime.step("add", {"n": 1}),
        duetime.step("add", {"n": 10}),
        duetime.step("add", {"n": 100}),
    )
    assert (first.status, second.status, third.status) == (S.SCHEDULED, S.BLOCKED, S.BLOCKED)
    assert [p.id for p in app.get_job(third.id).parents] == [second.id]
    worker = Worker(app, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: app.get_job(third.id).status is S.SUCCEEDED))
    assert app.result(third.id, timeout=0) == 111
    assert seen == [{}, {first.id: 1}, {second.id: 11}]


def test_a_group_callback_gets_every_members_result(app: duetime.App) -> None:
    summaries: list[dict[int, Any]] = []

    @app.task(name="charge_invoice")
    def charge(invoice_id: int) -> dict[str, int]:
        if invoice_id == 3:
            raise duetime.PermanentError("card declined")
        return {"invoice_id": invoice_id, "cents": 100 * invoice_id}

    @app.task(name="mail_summary")
    async def mail(batch: str) -> int:
        results = await duetime.current().aparent_results()
        summaries.append(dict(results))
        return len(results)

    group = app.group(
        [duetime.step("charge_invoice", {"invoice_id": i}) for i in range(5)],
        then=duetime.step("mail_summary", {"batch": "2030-03"}, on_parent_failure="run"),
    )
    assert group.callback is not None
    assert {j.status for j in group.jobs} == {S.SCHEDULED}
    assert [p.id for p in app.get_job(group.callback.id).parents] == group.ids
    worker = Worker(app, poll_interval=0.02)
    callback = group.callback.id
    asyncio.run(run_until(worker, lambda: app.get_job(callback).status is S.SUCCEEDED))
    assert app.result(callback, timeout=0) == 4
    expected = {j.id: {"invoice_id": i, "cents": 100 * i} for i, j in enumerate(group.jobs)}
    del expected[group.ids[3]]  # dead: absent
    assert summaries == [expected]


def test_a_failed_step_cancels_the_rest_of_its_chain(app: duetime.App) -> None:
    @app.task(name="fail")
    def fail() -> None:
        raise duetime.PermanentError("no")

    @app.task(name="never")
    def never() -> None:
        raise AssertionError("a cancelled step ran")

    first, second, third = app.chain(
        duetime.step("fail"), duetime.step("never"), duetime.step("never")
    )
    worker = Worker(app, poll_interval=0.02)
    asyncio.run(run_until(worker, lambda: app.get_job(third.id).status is S.CANCELLED))
    assert app.get_job(second.id).cancel_reason == f"parent job {first.id} ended dead"
    assert app.get_job(third.id).cancel_reason == f"parent job {second.id} ended cancelled"


def test_async_twins_and_an_outside_parent(app: duetime.App) -> None:
    outside = app.enqueue("t")

    async def both() -> tuple[list[Job], duetime.Group]:
        chained = await app.achain(duetime.step("t"), duetime.step("t"), depends_on=[outside.id])
        grouped = await app.agroup([duetime.step("t")], depends_on=[chained[-1].id])
        return chained, grouped

    chained, grouped = asyncio.run(both())
    assert [p.id for p in app.get_job(chained[0].id).parents] == [outside.id]
    assert [p.id for p in app.get_job(grouped.jobs[0].id).parents] == [chained[1].id]
    assert grouped.callback is None


def test_steps_are_checked_before_anything_is_written(app: duetime.App) -> None:
    with pytest.raises(InvalidRequest, match="takes no key"):
        app.chain(duetime.step("t"), duetime.step("t", key="k"))
    with pytest.raises(InvalidRequest, match=r"duetime\.step"):
        app.group(["t"])  # type: ignore[list-item]
    with pytest.raises(InvalidRequest, match="at least one step"):
        app.chain()
    with pytest.raises(InvalidRequest, match="on_parent_failure"):
        app.chain(duetime.step("t"), duetime.step("t", on_parent_failure="maybe"))
    with pytest.raises(InvalidRequest, match="at most 10000"):
        app.group([duetime.step("t")] * 10_001, then=duetime.step("t"))
    assert app.list_jobs() == []
    first = app.chain(duetime.step("t", key="k"))[0]  # the first step may take a key
    assert first.idempotency_key == "k"


def test_a_handler_reads_its_parents_once_and_a_plain_job_never(
    store: Store, clock: ManualClock
) -> None:
    from duetime.runtime.context import AttemptContext

    parent = enqueue(store, clock)
    _end(store, clock, parent, Outcome(Event.SUCCEED, result="[1,2]"))
    plain = enqueue(store, clock)
    child = enqueue(store, clock, depends_on=[parent.id])
    reads: list[int] = []

    def reader(job_id: int) -> dict[int, Any]:
        reads.append(job_id)
        return store.parent_results(job_id)

    for claim in store.claim(worker_id="w", queues=None, limit=2, now=clock.now()):
        ctx = AttemptContext(claim)
        ctx._parent_reader = reader
        expected = {parent.id: [1, 2]} if claim.job.id == child.id else {}
        assert ctx.parent_results == expected
        assert ctx.parent_results == expected
        with pytest.raises(TypeError):
            ctx.parent_results[1] = 2  # type: ignore[index]
    assert reads == [child.id]  # once, and not for the plain job
    assert plain.id != child.id

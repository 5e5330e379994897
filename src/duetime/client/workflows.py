"""App's chains and groups (docs/workflows.md, "Chains and groups"): jobs that depend on each
other, enqueued together in one transaction (Store.enqueue_graph), each async twin beside its
method. A step reads what the steps it waited for returned from
duetime.current().parent_results: nothing rewrites its args."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from duetime import tracing
from duetime.client.lookup import new_job_of
from duetime.client.part import AppPart
from duetime.core.dependencies import MAX_PARENTS, parent_ids
from duetime.core.errors import InvalidRequest
from duetime.core.models import Job, NewJob
from duetime.core.workflows import Step, chain_links, check_steps, group_links
from duetime.logs import log_event
from duetime.twins import async_twin

log = logging.getLogger("duetime.app")


@dataclass(frozen=True)
class Group:
    """The jobs app.group() made: its members, in the order given, and its callback (None
    without `then`)."""

    jobs: list[Job]
    callback: Job | None

    @property
    def ids(self) -> list[int]:
        """The members' ids."""
        return [j.id for j in self.jobs]


class Workflows(AppPart):
    """Chains and groups of jobs of the app's tenant."""

    def chain(
        self,
        *steps: Step,
        depends_on: Iterable[int] | None = None,
        connection: Any = None,
    ) -> list[Job]:
        """Enqueue `steps` (made by duetime.step) to run one after another, in one transaction
        (all of them or none): each waits, `blocked`, for the one before it and runs once that
        one succeeded; it finds that one's result in duetime.current().parent_results. A step
        that ends dead, cancelled or expired cancels the rest (a step with
        on_parent_failure="run" runs anyway). `depends_on` makes the first step wait for
        those jobs too. Returns the jobs, in order."""
        given = check_steps(steps, "chain()")
        if not given:
            raise InvalidRequest("chain() takes at least one step")
        return self._graph(given, chain_links(len(given)), depends_on, connection)

    achain = async_twin(chain)

    def group(
        self,
        steps: Iterable[Step],
        *,
        then: Step | None = None,
        depends_on: Iterable[int] | None = None,
        connection: Any = None,
    ) -> Group:
        """Enqueue `steps` (made by duetime.step) to run in parallel and, with `then`, a
        callback that runs once after all of them (it depends on every member; it finds
        their results in duetime.current().parent_results), in one transaction. By default a
        member that ends dead, cancelled or expired cancels the callback; give it
        on_parent_failure="run" to run it once every member has ended. `depends_on` makes
        every member wait for those jobs too. A group has at most 10,000 members with a
        callback."""
        members = check_steps(list(steps), "group()")
        if not members:
            raise InvalidRequest("group() takes at least one step")
        if then is not None:
            check_steps([then], "group(then=)")
            if len(members) > MAX_PARENTS:
                raise InvalidRequest(
                    f"group() has {len(members)} steps and a callback, which may depend on at "
                    f"most {MAX_PARENTS}; split it (groups whose callbacks feed one last job)"
                )
        every = members + ([then] if then is not None else [])
        made = self._graph(
            every, group_links(len(members), then is not None), depends_on, connection
        )
        return Group(made[: len(members)], made[len(members)] if then is not None else None)

    agroup = async_twin(group)

    def _graph(
        self,
        steps: Sequence[Step],
        links: list[list[int]],
        depends_on: Iterable[int] | None,
        connection: Any,
    ) -> list[Job]:
        store = self.store  # opened first: due times on the database's clock
        outside = list(parent_ids(depends_on))
        jobs: list[NewJob] = []
        for s, refs in zip(steps, links, strict=True):
            options = dict(s.options)
            if not refs and outside:
                options["depends_on"] = outside
            jobs.append(new_job_of(self, s.task, s.args, options, linked=bool(refs)))
        if tracing.enabled():  # one span for the graph; its context stored with every job
            with tracing.enqueue_span(
                jobs[0].task, queue=jobs[0].queue, tenant=jobs[0].tenant
            ) as span:
                jobs = [replace(j, trace_context=span.trace_context) for j in jobs]
                made = [
                    r.job
                    for r in store.enqueue_graph(
                        jobs, links, self.clock.now(), connection=connection
                    )
                ]
                span.created([j.id for j in made], batch=True)
        else:
            made = [
                r.job
                for r in store.enqueue_graph(jobs, links, self.clock.now(), connection=connection)
            ]
        log_event(log, "jobs.enqueued", task=jobs[0].task, count=len(made))
        return made

"""The SQL store's flow part: the settings of queues and tenants (dispatch mode, pause, caps,
weights, max backlog), the copy of them the claims read, and admission control
(docs/flow-control.md).

A claim when no control row restricts claims runs the plain claim statement: the flow part
keeps a copy of the control rows read at most CONTROLS_SECONDS ago (flow_controls), and of the
outbox-mode queues' names (outbox_queues). A pause does not wait for that copy: every statement
that starts attempts (claim, claim_chosen, dispatch_outbox) leaves out the jobs of queues whose
row says paused as it runs, and the controlled and limited picks read the paused queues in their
own transaction (paused_now). An enqueue into a queue or tenant with a max_backlog locks that
row, counts its backlog and refuses past it (admit); so does a replay, unless the operator
overrides the bound (ignore_backlog). The claims themselves are store/sql/claim.py's.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

from duetime.core.errors import BacklogFull
from duetime.core.flow.parsers import KEEP, Keep, check_limit, check_paused, check_weight
from duetime.core.flow.records import (
    BACKLOG_RETRY_AFTER,
    CONTROLS_SECONDS,
    FlowControls,
    FlowCounts,
    TenantSettings,
)
from duetime.core.models import NewJob
from duetime.core.outbox import DISPATCH_HOLDER, Dispatch, QueueSettings
from duetime.core.states import Event, JobStatus, next_status
from duetime.store.driver import Connection, Driver, Row
from duetime.store.sql.cache import TtlCache
from duetime.store.sql.dependencies import Dependencies
from duetime.store.sql.shared import (
    Part,
    conflicts_retried,
    earliest_of,
    sequence_keys,
    settle_sequences,
    withdraw_dispatched,
)

log = logging.getLogger("duetime.store")

# how long a store trusts its copy of the outbox-mode queues' names: a switch of a queue's
# dispatch mode reaches other processes' claims within this (a job claimed meanwhile simply
# runs the other way: a claim and a dispatch both take only scheduled jobs, under row locks)
QUEUE_MODES_SECONDS = 1.0


class Flow(Part):
    def __init__(
        self, driver: Driver, monotonic: Callable[[], float], dependencies: Dependencies
    ) -> None:
        super().__init__(driver)
        self.dependencies = dependencies
        self._outbox_queues: TtlCache[list[str]] = TtlCache(QUEUE_MODES_SECONDS, monotonic)
        self._controls: TtlCache[FlowControls] = TtlCache(CONTROLS_SECONDS, monotonic)

    # -- queue settings ---------------------------------------------------------------------

    def outbox_queues(self) -> list[str]:
        """The names of the queues in outbox mode (what claim() leaves to the relay), read
        at most QUEUE_MODES_SECONDS ago: the claim's hot path does not read them each time."""
        cached = self._outbox_queues.fresh()
        if cached is not None:
            return cached
        at = self._outbox_queues.now()
        names = [q.queue for q in self.queue_settings() if q.dispatch is Dispatch.OUTBOX]
        return self._outbox_queues.put(names, at)

    def queue_settings(self) -> list[QueueSettings]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("queue_settings")
        return [self._settings(r) for r in rows]

    @conflicts_retried
    def set_queue(
        self,
        queue: str,
        now: datetime,
        *,
        dispatch: Dispatch | None = None,
        paused: bool | None = None,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> QueueSettings:
        with self.driver.transaction() as c:
            c.run(
                "upsert_queue",
                queue=queue,
                dispatch=str(dispatch) if dispatch is not None else None,
                paused=check_paused(paused),
                weight=check_weight(weight),
                now=now,
                **limit_params(concurrency, max_backlog),
            )
            if dispatch is Dispatch.DIRECT:  # its dispatched attempts no worker took: back
                self._withdraw_stranded(c, now)
            if paused is False or concurrency is not KEEP:
                self._wake_held_back(c, now)
            rows = c.rows("queue_settings")
        self._outbox_queues.clear()  # this process's claims see the change at once
        self._controls.clear()
        return next(self._settings(r) for r in rows if r["queue"] == queue)

    def _wake_held_back(self, c: Connection, now: datetime) -> None:
        """A resume or a new cap may let jobs start that waited, due long ago: the workers
        are told of the earliest due job (a worker's claims on PostgreSQL start at a floor
        that such a wake-up lowers, core/claim_floor.py; without it they would find those
        jobs only at their timer's next look below the floor, runtime/timer.py)."""
        row = c.one("oldest_overdue", tenant=None, now=now)
        if row is not None and row["due_at"] is not None:
            self.driver.notify(c, {"": self._t(row["due_at"])})

    @conflicts_retried
    def withdraw_stranded(self, now: datetime) -> int:
        # read first (every reaper pass runs this): a write transaction only when a queue
        # not in outbox mode has an attempt held by the outbox, which a race leaves rarely
        with self.driver.transaction(write=False) as c:
            held = {r["queue"] for r in c.rows("dispatched_figures", holder=DISPATCH_HOLDER)}
            if not held:
                return 0
            modes = {r["queue"]: r["dispatch"] for r in c.rows("queue_settings")}
        if all(modes.get(q) == Dispatch.OUTBOX for q in held):
            return 0
        with self.driver.transaction() as c:
            return len(self._withdraw_stranded(c, now))

    def _withdraw_stranded(self, c: Connection, now: datetime) -> list[Row]:
        """Withdraw the attempts held by the outbox of every queue not in outbox mode (the
        relay would never publish them again, nor would a direct claim take them), so their
        jobs are claimed at once; their messages, if any, are then stale. Their attempts
        do not count. Notifies the workers of the jobs due now."""
        rows = withdraw_dispatched(c, now, direct=True)
        ended = [r["id"] for r in rows if r["status"] == JobStatus.CANCELLED]
        if ended:  # a standing cancel request ended them: their children are told
            self.dependencies.settle_ids(c, ended, now)
        due = [(r["queue"], self._t(r["due_at"])) for r in rows if r["status"] == "scheduled"]
        if due:
            self.driver.notify(c, earliest_of(due))
        ended = [r["id"] for r in rows if r["status"] == "cancelled"]
        if ended:  # a cancelled job of a sequence lets the next run
            keys = sequence_keys(c, ended)
            if keys:
                self.driver.notify(c, settle_sequences(c, keys, now, self._t))
        if rows:
            log.info(
                "withdrew %d dispatched attempts no worker took from queues not in outbox mode "
                "(jobs %s); direct workers claim them",
                len(rows),
                ", ".join(str(r["id"]) for r in rows[:20]) + (" ..." if len(rows) > 20 else ""),
            )
        return rows

    def _settings(self, r: Row) -> QueueSettings:
        return QueueSettings(
            r["queue"],
            Dispatch(r["dispatch"]),
            self._t(r["updated_at"]),
            paused=bool(r["paused"]),
            concurrency=r["concurrency"],
            max_backlog=r["max_backlog"],
            weight=float(r["weight"]),
        )

    # -- tenant settings and the controls' copy -----------------------------------------------

    def tenant_settings(self) -> list[TenantSettings]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("tenant_settings")
        return [self._tenant(r) for r in rows]

    @conflicts_retried
    def set_tenant(
        self,
        tenant: str,
        now: datetime,
        *,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> TenantSettings:
        with self.driver.transaction() as c:
            c.run(
                "upsert_tenant",
                tenant=tenant,
                now=now,
                weight=check_weight(weight),
                **limit_params(concurrency, max_backlog),
            )
            if concurrency is not KEEP:
                self._wake_held_back(c, now)
            rows = c.rows("tenant_settings")
        self._controls.clear()  # this process's claims and enqueues see the change at once
        return next(self._tenant(r) for r in rows if r["tenant"] == tenant)

    def _tenant(self, r: Row) -> TenantSettings:
        return TenantSettings(
            r["tenant"],
            concurrency=r["concurrency"],
            max_backlog=r["max_backlog"],
            weight=float(r["weight"]),
            updated_at=self._t(r["updated_at"]),
        )

    def flow_controls(self) -> FlowControls:
        """Every control row, read at most CONTROLS_SECONDS ago."""
        cached = self._controls.fresh()
        if cached is not None:
            return cached
        at = self._controls.now()
        queues = self.queue_settings()
        controls = FlowControls.of(queues, self.tenant_settings())
        # the same read refreshes the outbox-mode queues' names (one read a second, not two)
        self._outbox_queues.put([q.queue for q in queues if q.dispatch is Dispatch.OUTBOX], at)
        return self._controls.put(controls, at)

    def flow_counts(self, now: datetime) -> list[tuple[str, str, FlowCounts]]:
        """(queue, tenant, counts) of every queue and tenant with jobs waiting or running;
        waiting and waiting_seconds as of `now`."""
        with self.driver.transaction(snapshot=True) as c:
            rows = c.rows("flow_counts", now=now)
        found = []
        for r in rows:
            oldest = r["oldest_due_at"]
            waited = 0.0 if oldest is None else (now - self._t(oldest)).total_seconds()
            counts = FlowCounts(
                int(r["backlog"]), int(r["running"]), int(r["waiting"]), max(0.0, waited)
            )
            found.append((r["queue"], r["tenant"], counts))
        return found

    def paused_now(self, c: Connection) -> set[str]:
        """The paused queues as their rows are now, read in the caller's transaction."""
        return {r["queue"] for r in c.rows("queue_settings") if r["paused"]}

    # -- admission control --------------------------------------------------------------------

    def admit(self, c: Connection, jobs: Sequence[NewJob], controls: FlowControls) -> None:
        """Refuse (BacklogFull, nothing stored) a batch that would take a queue's or tenant's
        backlog past its max_backlog. A schedule's occurrences are always admitted. The rows
        are locked (queues, then tenants, in code-point order), so concurrent enqueues count
        each other's jobs."""
        if not controls.bounds_backlog:
            return
        fresh = [j for j in jobs if j.schedule_id is None]
        queues = Counter(j.queue for j in fresh if j.queue in controls.queue_backlogs)
        tenants = Counter(j.tenant for j in fresh if j.tenant in controls.tenant_backlogs)
        self._admit_counts(c, queues, tenants)

    def admit_replay(
        self, c: Connection, controls: FlowControls, job_id: int, tenant: str | None
    ) -> None:
        """Refuse (BacklogFull) a replay that would take its queue's or tenant's backlog past
        its max_backlog, as an enqueue of the job would be (an occurrence's too: a replay is
        an operator's, not the planner's)."""
        if not controls.bounds_backlog:
            return
        row = c.one("select_job", id=job_id, tenant=tenant)
        if row is None or next_status(Event.REPLAY, JobStatus(row["status"])) is None:
            return  # the move itself says why it cannot happen
        queue, owner = row["queue"], row["tenant"]
        self._admit_counts(
            c,
            Counter({queue: 1} if queue in controls.queue_backlogs else {}),
            Counter({owner: 1} if owner in controls.tenant_backlogs else {}),
            replay_of=job_id,
        )

    def _admit_counts(
        self,
        c: Connection,
        queues: Counter[str],
        tenants: Counter[str],
        *,
        replay_of: int | None = None,
    ) -> None:
        """Refuse (BacklogFull) adding these many jobs to these queues' and tenants' backlogs
        when one would go past its max_backlog; the rows stay locked until the commit."""
        for kind, counted in (("queue", queues), ("tenant", tenants)):
            for name in sorted(counted):
                row = c.one(f"lock_{kind}_backlog", **{kind: name})
                if row is None or row["max_backlog"] is None:
                    continue
                limit = int(row["max_backlog"])
                found = c.one(f"{kind}_backlog", **{kind: name})
                backlog = int(found["n"]) if found is not None else 0
                if backlog + counted[name] > limit:
                    raise BacklogFull(
                        kind, name, limit, backlog, BACKLOG_RETRY_AFTER, replay_of=replay_of
                    )


def limit_params(
    concurrency: int | Keep | None, max_backlog: int | Keep | None
) -> dict[str, object]:
    """The parameters of upsert_queue/upsert_tenant for two limits (KEEP: left as it is),
    each within its bounds (core/flow/parsers.py): no value out of range reaches a column."""
    if not isinstance(concurrency, Keep):
        check_limit(concurrency, "concurrency")
    if not isinstance(max_backlog, Keep):
        check_limit(max_backlog, "max_backlog")
    return {
        "set_concurrency": not isinstance(concurrency, Keep),
        "concurrency": None if isinstance(concurrency, Keep) else concurrency,
        "set_max_backlog": not isinstance(max_backlog, Keep),
        "max_backlog": None if isinstance(max_backlog, Keep) else max_backlog,
    }

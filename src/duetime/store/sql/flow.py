"""The SQL store's flow control of queues and tenants (mixed into store/sql/front.py): their
settings, the controlled claim and admission control (docs/flow-control.md).

A claim when no control row restricts claims runs the plain claim statement: the store keeps
a copy of the control rows read at most CONTROLS_SECONDS ago. A pause does not wait for that
copy: every statement that starts attempts (claim, claim_chosen, dispatch_outbox) leaves out
the jobs of queues whose row says paused as it runs, and the controlled and limited picks
read the paused queues in their own transaction. Otherwise, in one transaction:
the rows of every capped queue and tenant are locked (queues, then tenants, each in code-point
order: concurrent controlled claims take turns), the running attempts counted, the candidates
read (claim order, without the paused, outbox and full queues and the full tenants) and
chosen by core/flow.choose, and the chosen started (claim_chosen). When limits per dependency
exist too (store/sql/limits.py), their rows are locked next, the candidates leave out the jobs
of blocked keys, only those every key of which still allows a start go to choose, and the
claim spends the keys' tokens and counts their starts. The relay's dispatch of outbox-mode
queues (dispatch_outbox) makes the same choice over those queues when a control concerns them,
starts the attempts held by DISPATCH_HOLDER and writes their outbox events in the same
transaction. An enqueue into a queue or
tenant with a max_backlog locks that row likewise, counts its backlog and refuses past it;
so does a replay, unless the operator overrides the bound (ignore_backlog).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from time import monotonic

from duetime.core.errors import BacklogFull, StoreError
from duetime.core.flow import (
    BACKLOG_RETRY_AFTER,
    CONTROLS_SECONDS,
    KEEP,
    MAX_PROBES,
    MAX_ROUNDS,
    WEIGHTED_SCAN,
    Candidate,
    FlowControls,
    FlowCounts,
    Keep,
    PriorityShare,
    Ranked,
    TenantRotation,
    TenantSettings,
    check_weight,
    choose,
    full,
    room,
)
from duetime.core.models import Claim, NewJob
from duetime.core.outbox import DISPATCH_HOLDER, Dispatch, OutboxEvent
from duetime.core.states import Event, JobStatus, next_status
from duetime.store.driver import Connection, Driver, Row
from duetime.store.rows import (
    ToTime,
    claims_from_rows,
    moves_json,
)
from duetime.store.sql.limits import Limits
from duetime.store.sql.outbox import QueuesOutbox, limit_params
from duetime.store.sql.shared import conflicts_retried, pick_filters


class QueuesTenantsFlow(QueuesOutbox, Limits):
    driver: Driver
    _t: ToTime
    priorities: PriorityShare
    tenant_rotation: TenantRotation
    dispatch_rotation: TenantRotation
    queue_credit: dict[str, float]

    # -- settings -----------------------------------------------------------------------------

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
            rows = c.rows("tenant_settings")
        self._controls = None  # this process's claims and enqueues see the change at once
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
        cached = self._controls
        at = monotonic()
        if cached is not None and at - cached[0] < CONTROLS_SECONDS:
            return cached[1]
        queues = self.queue_settings()
        controls = FlowControls.of(queues, self.tenant_settings())
        self._controls = (at, controls)
        # the same read refreshes the outbox-mode queues' names (one read a second, not two)
        self._outbox_queues = (at, [q.queue for q in queues if q.dispatch is Dispatch.OUTBOX])
        return controls

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

    # -- the controlled claim -----------------------------------------------------------------

    def _claim_controlled(
        self,
        controls: FlowControls,
        *,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: datetime,
        tasks: Sequence[str] | None,
        per_class: int = 0,
        rotate: bool = False,
    ) -> tuple[list[Claim], int]:
        """The controlled claim's claims, and how many due jobs it chose: more than it started
        when concurrent claims took some of them first."""
        outbox = self.outbox_queues()  # left to the relay
        with self.driver.transaction() as c:
            started, chosen = self._start_controlled(
                c,
                controls,
                leave_out=outbox,
                worker_id=worker_id,
                queues=queues,
                limit=limit,
                now=now,
                tasks=tasks,
                per_class=per_class,
                rotate=rotate,
            )
        return claims_from_rows(started, self._t), chosen

    def _start_controlled(
        self,
        c: Connection,
        controls: FlowControls,
        *,
        leave_out: Sequence[str],
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: datetime,
        tasks: Sequence[str] | None,
        per_class: int = 0,
        rotate: bool = False,
        dispatch_lease: float | None = None,
    ) -> tuple[list[Row], int]:
        """Choose and start up to `limit` jobs within every control, none of the queues of
        leave_out, in the caller's transaction; the started rows (claim_chosen's, fewer than
        the chosen when concurrent claims took some first) and how many were chosen. A worker's
        claim (dispatch_lease None; leave_out the outbox-mode queues) gives each attempt its
        job's lease. The relay's dispatch (`queues` the outbox-mode queues, leave_out empty)
        gives each attempt dispatch_lease, and takes jobs in claim order within the controls
        and the relay's own tenant rotation (dispatch_rotation): no priority share (a worker
        process's; per_class is not used)."""
        dispatching = dispatch_lease is not None
        turns = self.dispatch_rotation if dispatching else self.tenant_rotation
        queue_room: dict[str, int] = {}
        tenant_room: dict[str, int] = {}
        if controls.capped:  # the rows as they are now, locked: not the cached copy
            queue_caps = {r["queue"]: int(r["concurrency"]) for r in c.rows("lock_capped_queues")}
            tenant_caps = {
                r["tenant"]: int(r["concurrency"]) for r in c.rows("lock_capped_tenants")
            }
            by_queue: Counter[str] = Counter()
            by_tenant: Counter[str] = Counter()
            for r in c.rows("running_counts"):
                by_queue[r["queue"]] += int(r["n"])
                by_tenant[r["tenant"]] += int(r["n"])
            queue_room = room(queue_caps, by_queue)
            tenant_room = room(tenant_caps, by_tenant)
        # limits per dependency too, when any exists (their rows locked after these)
        budget = self._limit_budget(c, now) if self._limits_exist(c) else None
        # the pauses as the rows say now, not the copy: a pause made elsewhere holds at once
        skip_queues = set(leave_out) | self._paused_now(c)
        chosen: list[int] = []
        held: list[int] = []  # read, but held back by a limit: not read again
        # the lower priority classes' reserved slots (PriorityShare): their oldest due jobs
        # go first in the candidates, so they are taken while their queue and tenant have
        # room (with weights: first in their queue's and tenant's line)
        lower = (
            self._lower_classes(
                c,
                per_class,
                limit,
                now,
                queues,
                tasks,
                skip_queues | set(full(queue_room)),
                full(tenant_room),
            )
            if not dispatching and (per_class or self.priorities.owed)
            else []
        )
        # tenant fairness (TenantRotation): the tenants with due work, when more than one
        rotation = turns.due(lambda after: self._next_due_tenant(c, after, now)) if rotate else []
        for _ in range(MAX_ROUNDS):
            skip_queues |= set(full(queue_room))
            skip_tenants = full(tenant_room)
            want = limit - len(chosen)
            scan = want * WEIGHTED_SCAN if controls.weighted else want
            rows = c.rows(
                "claim_candidates",
                now=now,
                limit=scan,
                **pick_filters(queues, tasks),
                open_queues=not skip_queues,
                skip_queues=sorted(skip_queues),
                open_tenants=not skip_tenants,
                skip_tenants=skip_tenants,
                no_skip_ids=not (chosen or held),
                skip_ids=sorted(chosen + held),
                **(budget.filters() if budget is not None else NO_LIMITS),
            )
            found = [_candidate(r) for r in rows]
            if rotation and not chosen:
                found = (
                    self._rotated(
                        c,
                        turns,
                        rotation,
                        found,
                        controls,
                        want,
                        now,
                        queues,
                        tasks,
                        skip_queues,
                        skip_tenants,
                    )
                    + found
                )
            if lower:
                found, lower = lower + found, []
            if controls.weighted and not chosen and len(rows) >= scan:
                found += self._weighted_behind(
                    c, controls, found, want, now, queues, tasks, skip_queues, skip_tenants
                )
            found = list({f.id: f for f in found}.values())
            if budget is not None:
                fitting = budget.fitting([(f.id, f.limits, f.attempts) for f in found])
                held += [f.id for f in found if f.id not in fitting]
                found = [f for f in found if f.id in fitting]
            picked = choose(
                found,
                want,
                queue_room,
                tenant_room,
                controls.queue_weights,
                {} if rotation else controls.tenant_weights,
                None if dispatching else self.queue_credit,
            )
            if budget is not None:
                by_id = {f.id: f for f in found}
                for job_id in picked:
                    budget.take(by_id[job_id].limits, by_id[job_id].attempts)
            chosen += picked
            if len(chosen) >= limit or len(rows) < scan:
                break
        if budget is not None:
            at = budget.next_start(now)
            if dispatching:
                self._dispatch_next_start = at
            else:
                self._next_start = at
        if not chosen:
            return [], 0
        started = c.rows(
            "claim_chosen",
            ids=sorted(chosen),
            now=now,
            moves=moves_json(Event.CLAIM),
            worker_id=worker_id,
            lease_seconds=dispatch_lease,  # None: each job's own
        )
        if budget is not None:
            self._spend(c, budget, started, now)
        return started, len(chosen)

    def _paused_now(self, c: Connection) -> set[str]:
        """The paused queues as their rows are now, read in the caller's transaction."""
        return {r["queue"] for r in c.rows("queue_settings") if r["paused"]}

    # -- the relay's dispatch -------------------------------------------------------------------

    @conflicts_retried
    def dispatch_outbox(self, now: datetime, limit: int, lease_seconds: float) -> list[OutboxEvent]:
        """The relay's claim (docs/outbox.md). Without a control that concerns it (a cap or
        weight of an outbox-mode queue, a tenant's cap or weight, any limit per dependency),
        the dispatch statement alone (it honours pauses). Otherwise the controlled claim's
        choice of jobs of the outbox-mode queues (_start_controlled, limits included), their
        attempts held by DISPATCH_HOLDER with lease_seconds, and one event per started attempt,
        in one transaction. After a saturated dispatch the next one rotates over the tenants
        with due work (the relay's TenantRotation), through the controlled choice too."""
        if limit <= 0:
            return []
        self._dispatch_next_start = None  # the controlled dispatch says when a limit allows
        controls = self.flow_controls()
        outbox = self.outbox_queues()
        if not outbox:
            return self._dispatch_plain(now, limit, lease_seconds)
        rotate = self.dispatch_rotation.wanted()
        if rotate or controls.restricts_dispatch(outbox) or self.limit_names():
            events = self._dispatch_controlled(controls, outbox, now, limit, lease_seconds, rotate)
        else:
            events = self._dispatch_plain(now, limit, lease_seconds)
        self.dispatch_rotation.claimed(limit, len(events))
        return events

    def _dispatch_controlled(
        self,
        controls: FlowControls,
        outbox: list[str],
        now: datetime,
        limit: int,
        lease_seconds: float,
        rotate: bool,
    ) -> list[OutboxEvent]:
        with self.driver.transaction() as c:
            started, _ = self._start_controlled(
                c,
                controls,
                leave_out=[],
                worker_id=DISPATCH_HOLDER,
                queues=outbox,
                limit=limit,
                now=now,
                tasks=None,
                rotate=rotate,
                dispatch_lease=lease_seconds,
            )
            if not started:
                return []
            rows = c.rows(
                "insert_outbox_events",
                attempt_ids=sorted(int(r["attempt_id"]) for r in started),
                now=now,
                holder=DISPATCH_HOLDER,
            )
            if len(rows) != len(started):  # the row locks make this impossible: refuse to guess
                raise StoreError(
                    f"wrote {len(rows)} outbox events for {len(started)} dispatched attempts; "
                    "nothing kept"
                )
        return sorted((self._event(r) for r in rows), key=lambda e: e.id)

    def _next_due_tenant(self, c: Connection, after: str, now: datetime) -> str | None:
        row = c.one("next_due_tenant", after=after, now=now)
        return None if row is None else str(row["tenant"])

    def _rotated(
        self,
        c: Connection,
        turns: TenantRotation,
        rotation: list[str],
        seen: list[Candidate],
        controls: FlowControls,
        want: int,
        now: datetime,
        queues: Sequence[str] | None,
        tasks: Sequence[str] | None,
        skip_queues: set[str],
        skip_tenants: list[str],
    ) -> list[Candidate]:
        """The candidates of the tenants in rotation, in the order their turns give
        (TenantRotation.order): a tenant's own from the first read when it has enough there,
        else read from the tenant index (tenant_candidates)."""
        lines: dict[str, list[Candidate]] = {}
        for t in rotation:
            if t in skip_tenants:  # full: nothing of it may start
                continue
            mine = [x for x in seen if x.tenant == t]
            if len(mine) < want:
                rows = c.rows(
                    "tenant_candidates",
                    tenant=t,
                    now=now,
                    limit=want,
                    **pick_filters(queues, tasks),
                    open_queues=not skip_queues,
                    skip_queues=sorted(skip_queues),
                )
                mine = [_candidate(r) for r in rows]
            if mine:
                lines[t] = mine
        return turns.order(lines, controls.tenant_weights, want)

    def _lower_classes(
        self,
        c: Connection,
        per_class: int,
        limit: int,
        now: datetime,
        queues: Sequence[str] | None,
        tasks: Sequence[str] | None,
        skip_queues: set[str],
        skip_tenants: list[str],
    ) -> list[Candidate]:
        """Up to per_class of the oldest due jobs of each priority class below the highest due
        one (PriorityShare.walk), read from the claim-order index (lower_candidates)."""

        read_rows: dict[int, Row] = {}

        def read(below: int, n: int) -> list[Ranked]:
            rows = c.rows(
                "lower_candidates",
                now=now,
                limit=n,
                below=below,
                **pick_filters(queues, tasks),
                open_queues=not skip_queues,
                skip_queues=sorted(skip_queues),
                open_tenants=not skip_tenants,
                skip_tenants=skip_tenants,
            )
            read_rows.update((int(r["id"]), r) for r in rows)
            return [Ranked(int(r["id"]), int(r["priority"]), r["queue"], r["tenant"]) for r in rows]

        walked = self.priorities.walk(read, per_class, limit)
        return [_candidate(read_rows[r.id]) for r in walked]  # with their limit keys

    def _weighted_behind(
        self,
        c: Connection,
        controls: FlowControls,
        seen: list[Candidate],
        want: int,
        now: datetime,
        queues: Sequence[str] | None,
        tasks: Sequence[str] | None,
        skip_queues: set[str],
        skip_tenants: list[str],
    ) -> list[Candidate]:
        """The candidates of weighted queues and tenants (up to MAX_PROBES of each) that the
        first read did not reach, because other jobs fill its window: read one by one, so a
        weight counts in every claim wherever its jobs lie in claim order."""
        found: list[Candidate] = []
        seen_queues = {x.queue for x in seen}
        seen_tenants = {x.tenant for x in seen}
        common = {
            "now": now,
            "limit": want,
            "all_tasks": tasks is None,
            "tasks": list(tasks) if tasks is not None else [],
        }
        behind_queues = [
            q
            for q in sorted(controls.queue_weights)
            if q not in seen_queues and q not in skip_queues and (queues is None or q in queues)
        ]
        for q in behind_queues[:MAX_PROBES]:
            rows = c.rows(
                "queue_candidates",
                queue=q,
                open_tenants=not skip_tenants,
                skip_tenants=skip_tenants,
                **common,
            )
            found += [_candidate(r) for r in rows]
        seen_tenants |= {x.tenant for x in found}
        behind_tenants = [
            t
            for t in sorted(controls.tenant_weights)
            if t not in seen_tenants and t not in skip_tenants
        ]
        for t in behind_tenants[:MAX_PROBES]:
            rows = c.rows(
                "tenant_candidates",
                tenant=t,
                all_queues=queues is None,
                queues=list(queues) if queues is not None else [],
                open_queues=not skip_queues,
                skip_queues=sorted(skip_queues),
                **common,
            )
            found += [_candidate(r) for r in rows]
        return found

    # -- admission control --------------------------------------------------------------------

    def _admit(self, c: Connection, jobs: Sequence[NewJob], controls: FlowControls) -> None:
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

    def _admit_replay(
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


# the limits filters of claim_candidates when no limit exists: nothing blocked
NO_LIMITS = {"blocked": "[]", "retry_blocked": "[]"}


def _candidate(r: Row) -> Candidate:
    return Candidate(int(r["id"]), r["queue"], r["tenant"], r["limits"], int(r["attempts"]))

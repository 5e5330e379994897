"""The SQL store's claim part: one claimer, three picks (docs/flow-control.md). Past 400 lines
because the three picks and the fairness reads they share must be read together to be trusted.

A claim when no control row restricts claims and no limit exists is the claim statement alone
(plain). With limits per dependency only, the limited pick: in one transaction the limit rows
are locked (store/sql/limits.py budget), the due jobs picked in claim order leaving out those of
blocked keys, the chosen started (claim_chosen) and the keys' tokens spent. Otherwise the
controlled pick, in one transaction: the rows of every capped queue and tenant are locked
(queues, then tenants, each in code-point order: concurrent controlled claims take turns), the
running attempts counted, the limit rows locked next when limits exist, the candidates read
(claim order, without the paused, outbox and full queues and the full tenants, nor the jobs of
blocked keys) and chosen by core/flow/choice.choose, and the chosen started (claim_chosen).
The relay's dispatch (store/sql/outbox.py) makes the same controlled choice over the
outbox-mode queues through start_controlled. The settings and their cached copy are the flow part's
(store/sql/flow.py). The fairness reads: tenant rotation, lower priority classes, weighted
queues behind the window. A worker's claim that detours for fairness alone (no control
restricts it) makes its looks (the lower classes, the tenants) first, in its transaction
(Claimer._claim_detour), and runs the claim statement there when they find nothing to share
out.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from duetime.core.clock import Instant, read_instant
from duetime.core.flow.choice import (
    MAX_PROBES,
    MAX_ROUNDS,
    WEIGHTED_SCAN,
    Candidate,
    choose,
    full,
    room,
)
from duetime.core.flow.records import FlowControls
from duetime.core.flow.rotation import TenantRotation
from duetime.core.flow.share import PriorityShare, Ranked
from duetime.core.models import Claim
from duetime.core.states import Event
from duetime.store.base import Claimed, ClaimPlan
from duetime.store.driver import Connection, Driver, Row, at_connection
from duetime.store.rows import claims_from_rows, claims_from_values, moves_json
from duetime.store.sql.attempt_ids import AttemptIds, Reserved
from duetime.store.sql.flow import Flow
from duetime.store.sql.limits import Limits
from duetime.store.sql.shared import Part, claim_statement, conflicts_retried, pick_filters

PICK_ROUNDS = 4  # the limited pick's reads at most, when a key runs out on the way
# priority classes a claimer names to its seeks of the classes at most (Claimer.known_classes)
KNOWN_CLASSES = 8
NOTHING_SCHEDULED: dict[str, list[int]] = {"classes": []}  # Claimer.due_classes: no class


@dataclass(frozen=True)
class Started:
    """What a controlled pick started: claim_chosen's rows (fewer than chosen when concurrent
    claims took some first), how many it chose, and when a limit that held it back allows a
    start again (None: no limit held it back, or only an attempt's end frees one)."""

    rows: list[Row]
    chosen: int
    next_start: datetime | None


@dataclass(frozen=True)
class Looked:
    """What a worker's fairness looks found, in its claim's transaction before the pick
    (Claimer._look): the lower priority classes' jobs to take first (PriorityShare.walk) and
    the tenants to rotate over (TenantRotation.due: none when fewer than two have due
    work)."""

    lower: list[Candidate]
    tenants: list[str]

    def found(self) -> bool:
        """Whether the claim has anything to do that the plain claim would not."""
        return bool(self.lower or self.tenants)


class Claimer(Part):
    """The worker's claim: plain, limited or controlled picks; start_controlled serves the
    relay's dispatch too. Keeps no policy: the plan of each claim is the caller's."""

    def __init__(self, driver: Driver, flow: Flow, limits: Limits) -> None:
        super().__init__(driver)
        self.flow = flow
        self.limits = limits
        self.attempt_ids = AttemptIds(driver)  # reserved ahead where the dialect needs it
        # the priority classes of the jobs its claims started lately, the latest last
        # (known_classes: a hint to the seeks of the classes on PostgreSQL, none otherwise)
        self._seen: tuple[int, ...] = ()

    def known_classes(self) -> list[int]:
        """The priority classes this store's claims started jobs of lately, at most
        KNOWN_CLASSES, in order: the claim's seeks of the classes on PostgreSQL take each as
        it is and look only between them (the part floored_classes). A hint only: a class
        no longer due costs its walk one empty range; one it does not name is sought."""
        return sorted(self._seen)

    def _saw(self, claims: Sequence[Claim]) -> None:
        if not claims:
            return
        seen = {c.job.priority for c in claims}
        if not seen.issubset(self._seen):
            kept = [p for p in self._seen if p not in seen] + sorted(seen)
            self._seen = tuple(kept[-KNOWN_CLASSES:])  # (one tuple: read by other threads)

    @conflicts_retried
    def claim(
        self,
        plan: ClaimPlan,
        *,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: Instant,
        tasks: Sequence[str] | None = None,
    ) -> Claimed:
        """`now` a callable (a clock's): read in each transaction once its connection is held,
        so a wait for one neither stamps the attempts early nor starts a job past its
        deadline; a datetime: that instant."""
        if limit <= 0:
            return Claimed([], 0)
        ids = self.attempt_ids.take(limit)  # before the claim's transaction, in one of its own
        claimed = self._claim(plan, ids, worker_id, queues, limit, now, tasks)
        self._saw(claimed.claims)
        ids.used({"attempt_id": c.attempt.id} for c in claimed.claims)
        self.attempt_ids.give_back(ids)  # not on an error: its ids may be written
        return claimed

    def earliest_due(
        self, until: datetime, queues: Sequence[str] | None, tasks: Sequence[str] | None
    ) -> datetime | None:
        """Store.earliest_due: the plain claim's filters (its queues, tasks, and not the
        outbox-mode queues), from each class's first entry up to `until`."""
        outbox = self.flow.outbox_queues()
        with self.driver.transaction(write=False) as c:
            row = c.one(
                "earliest_due",
                until=until,
                **pick_filters(queues, tasks),
                all_direct=not outbox,
                outbox_queues=outbox,
            )
        return None if row is None or row["due_at"] is None else self._t(row["due_at"])

    def due_classes(self, c: Connection) -> dict[str, list[int]]:
        """The priority classes of the scheduled jobs in claim order, as the parameters of the
        statements that take them where the dialect has no skip scan (Driver.names_classes;
        {"classes": [...]}, their values as its claim-order index keeps them; NOTHING_SCHEDULED
        when none is); {} where the pick walks the classes itself (PostgreSQL). A seek in the
        claim-order index each, in the caller's transaction before its pick (one round trip
        more on MariaDB/MySQL for one class)."""
        if not self.driver.names_classes:
            return {}
        bounds = c.one("due_class_bounds")
        if bounds is None or bounds["top_class"] is None:
            return NOTHING_SCHEDULED
        classes, end = [int(bounds["top_class"])], int(bounds["end_class"])
        while classes[-1] != end:
            row = c.one("due_class_after", after=classes[-1])
            if row is None or row["class"] is None:
                break  # the end class went meanwhile (READ COMMITTED)
            classes.append(int(row["class"]))
        return {"classes": classes}

    def _claim(
        self,
        plan: ClaimPlan,
        ids: Reserved,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: Instant,
        tasks: Sequence[str] | None,
    ) -> Claimed:
        controls = self.flow.flow_controls()  # pause, caps, weights (docs/flow-control.md)
        owed = plan.priorities is not None and bool(plan.priorities.owed)
        if controls.restricts_claim or plan.per_class or owed or plan.rotation is not None:
            return self._claim_detour(controls, plan, ids, worker_id, queues, limit, now, tasks)
        claims, next_start, limited = self._claim_plain(
            ids, worker_id, queues, limit, now, tasks, plan.floor
        )
        # it skips locked rows: short only when nothing more is due
        return Claimed(claims, len(claims), next_start, plain=not limited)

    def _claim_detour(
        self,
        controls: FlowControls,
        plan: ClaimPlan,
        ids: Reserved,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: Instant,
        tasks: Sequence[str] | None,
    ) -> Claimed:
        """A claim under flow control or making a fairness detour, in one transaction: the
        controlled pick. A detour for fairness alone (no control restricts the claim) makes
        its looks first (Claimer._look: the lower classes' reserved jobs, locked as they are
        read, and the tenants with due work) and gives the pick what they found; when they
        found nothing to share out (one class and one tenant due: the common case), it runs
        the plain claim's statement instead (plain: its floor may rise), not the pick's reads
        and moves."""
        fair_only = not controls.restricts_claim
        # the cached copies, read before the transaction (a refresh reads in one of its own)
        outbox = self.flow.outbox_queues()  # left to the relay
        limits = fair_only and bool(self.limits.limit_names())
        with self.driver.transaction() as c:
            at = read_instant(now)  # once the connection is held
            looked = self._look(c, plan, limit, queues, tasks, at, outbox) if fair_only else None
            if looked is not None and not looked.found():
                claims, next_start, limited = self._claim_plain(
                    ids, worker_id, queues, limit, at, tasks, plan.floor, within=(c, outbox, limits)
                )
                return Claimed(claims, len(claims), next_start, plain=not limited)
            started = self.start_controlled(
                c,
                controls,
                plan.rotation,
                ids,
                leave_out=outbox,
                worker_id=worker_id,
                queues=queues,
                limit=limit,
                now=at,
                tasks=tasks,
                per_class=plan.per_class,
                priorities=plan.priorities,
                credit=plan.credit,
                floor=plan.floor,
                looked=looked,
            )
        claims = claims_from_rows(started.rows, self._t, worker_id)
        # what the claim found due, not what it started, tells whether it took every due job:
        # a controlled claim starts fewer than it chose when concurrent claims took some first
        found, next_start = started.chosen, started.next_start
        if not claims and fair_only:
            # a detour for fairness only that started nothing: its candidates are read
            # without locks, so concurrent claims may have started them all; the plain claim
            # (which skips locked rows) looks again, so a claim under contention is not empty
            # while jobs are due (a partial detour stays as it is: its slots kept the classes'
            # shares)
            claims, limited_at, limited = self._claim_plain(
                ids, worker_id, queues, limit, now, tasks, plan.floor
            )
            found = len(claims)
            if limited:
                next_start = limited_at
        return Claimed(claims, found, next_start)

    def _within(self, c: Connection | None) -> AbstractContextManager[Connection]:
        """`c`, a transaction under way, or a transaction of its own when None."""
        return nullcontext(c) if c is not None else self.driver.transaction()

    def _claim_plain(
        self,
        ids: Reserved,
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: Instant,
        tasks: Sequence[str] | None,
        floor: datetime | None = None,
        within: tuple[Connection, list[str], bool] | None = None,
    ) -> tuple[list[Claim], datetime | None, bool]:
        """The claim without flow control: the limited path while limits exist, else the claim
        statement alone (after the read of the priority classes where the dialect needs them;
        from `floor` on, where the dialect's statement takes one: ClaimPlan.floor), in a
        transaction of its own, or `within` one under way (Claimer._claim_detour: its
        connection, and the outbox-mode queues and whether limits exist as read before it).
        Its claims, when a limit allows a start again, and whether the limited path ran."""
        if within is None:
            c, outbox, limits = None, self.flow.outbox_queues(), bool(self.limits.limit_names())
        else:
            c, outbox, limits = within
        if limits:  # limits exist: the limited path (store/sql/limits.py)
            with self._within(c) as c:
                at_start = read_instant(now)  # once the connection is held
                # the pick leaves out the paused queues as their rows say now (claim_chosen
                # checks again as it starts the jobs), not as the copy of the control rows does
                leave_out = sorted(set(outbox) | self.flow.paused_now(c))
                rows, at = self._limited(
                    c,
                    ids,
                    at_start,
                    limit,
                    worker_id,
                    {
                        **pick_filters(queues, tasks),
                        "all_direct": not leave_out,
                        "outbox_queues": leave_out,
                    },
                )
            return claims_from_rows(rows, self._t, worker_id), at, True
        params = {
            "now": now,
            "limit": limit,
            **pick_filters(queues, tasks),
            "moves": moves_json(Event.CLAIM),
            "worker_id": worker_id,
            "all_direct": not outbox,
            "outbox_queues": outbox,
            "floor": floor,
            "known": self.known_classes(),
            **ids.params,
        }
        if c is None and not self.driver.names_classes:
            # a transaction of its own, in as few round trips as the dialect can
            # (Driver.values_alone, which reads a callable `now` once its connection is held)
            names, values = self.driver.values_alone(claim_statement(queues), **params)
            return claims_from_values(names, values, self._t, worker_id), None, False
        with self._within(c) as c:
            classes = self.due_classes(c)
            rows = (
                c.rows(claim_statement(queues), **classes, **at_connection(params))
                if classes != NOTHING_SCHEDULED
                else []
            )
        return claims_from_rows(rows, self._t, worker_id), None, False

    def start_controlled(
        self,
        c: Connection,
        controls: FlowControls,
        turns: TenantRotation | None,
        ids: Reserved,
        *,
        leave_out: Sequence[str],
        worker_id: str,
        queues: Sequence[str] | None,
        limit: int,
        now: datetime,
        tasks: Sequence[str] | None,
        per_class: int = 0,
        priorities: PriorityShare | None = None,
        credit: dict[str, float] | None = None,
        dispatch_lease: float | None = None,
        floor: datetime | None = None,
        looked: Looked | None = None,
    ) -> Started:
        """Choose and start up to `limit` jobs within every control, none of the queues of
        leave_out, in the caller's transaction; the started rows (claim_chosen's, fewer than
        the chosen when concurrent claims took some first) and how many were chosen. A worker's
        claim (dispatch_lease None; leave_out the outbox-mode queues) gives each attempt its
        job's lease. The relay's dispatch (`queues` the outbox-mode queues, leave_out empty)
        gives each attempt dispatch_lease, and takes jobs in claim order within the controls
        and the relay's own tenant rotation (`turns`): no priority share (a worker
        process's; per_class is not used). `floor`: where the candidates' walks start, where
        the dialect's statements take one (a worker's, ClaimPlan.floor; None: from the first
        entry). `ids`: the attempt ids reserved for it
        (store/sql/attempt_ids.py). `looked`: what a worker's fairness looks found earlier in
        this transaction (Claimer._look), else they look here."""
        dispatching = dispatch_lease is not None
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
        budget = self.limits.budget(c, now) if self.limits.exists(c) else None
        # the pauses as the rows say now, not the copy: a pause made elsewhere holds at once
        skip_queues = set(leave_out) | self.flow.paused_now(c)
        # the candidates' reads stop at each class's due rows, and start at the floor
        classes: dict[str, Any] = {
            **self.due_classes(c),
            "floor": floor,
            "known": self.known_classes(),
        }
        chosen: list[int] = []
        held: list[int] = []  # read, but held back by a limit: not read again
        # the lower priority classes' reserved slots (PriorityShare): their oldest due jobs
        # go first in the candidates, so they are taken while their queue and tenant have
        # room (with weights: first in their queue's and tenant's line)
        lower = (
            looked.lower
            if looked is not None
            else self._lower_classes(
                c,
                classes,
                priorities,
                per_class,
                limit,
                now,
                queues,
                tasks,
                skip_queues | set(full(queue_room)),
                full(tenant_room),
            )
            if not dispatching and priorities is not None and (per_class or priorities.owed)
            else []
        )
        # tenant fairness (TenantRotation): the tenants with due work, when more than one
        if looked is not None:
            rotation = looked.tenants
        elif turns is not None:
            rotation = turns.due(lambda after: self._next_due_tenant(c, after, now, floor))
        else:
            rotation = []
        for _ in range(MAX_ROUNDS):
            skip_queues |= set(full(queue_room))
            skip_tenants = full(tenant_room)
            want = limit - len(chosen)
            scan = want * WEIGHTED_SCAN if controls.weighted else want
            rows = c.rows(
                "claim_candidates",
                **classes,
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
            if turns is not None and rotation and not chosen:
                found = (
                    self._rotated(
                        c,
                        classes,
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
                    c, classes, controls, found, want, now, queues, tasks, skip_queues, skip_tenants
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
                None if dispatching else credit,
            )
            if budget is not None:
                by_id = {f.id: f for f in found}
                for job_id in picked:
                    budget.take(by_id[job_id].limits, by_id[job_id].attempts)
            chosen += picked
            if len(chosen) >= limit or len(rows) < scan:
                break
        at = budget.next_start(now) if budget is not None else None
        if not chosen:
            return Started([], 0, at)
        started = c.rows(
            "claim_chosen",
            ids=sorted(chosen),
            now=now,
            moves=moves_json(Event.CLAIM),
            worker_id=worker_id,
            lease_seconds=dispatch_lease,  # None: each job's own
            **ids.params,
        )
        if budget is not None:
            self.limits.spend(c, budget, started, now)
        return Started(started, len(chosen), at)

    def _look(
        self,
        c: Connection,
        plan: ClaimPlan,
        limit: int,
        queues: Sequence[str] | None,
        tasks: Sequence[str] | None,
        now: datetime,
        outbox: list[str],
    ) -> Looked:
        """A worker's fairness looks for its claim of `limit` slots, in the claim's
        transaction `c` before its pick: the lower classes' jobs its reserved slots take
        (plan.per_class and what earlier walks owe, PriorityShare.walk; locked as they are
        read, so two workers' reservations do not take the same jobs) and the tenants with
        due work (plan.rotation, TenantRotation.due), each as the controlled pick reads them
        (no cap restricts this claim: no queue or tenant is full; the lower classes without
        the outbox-mode queues, `outbox`; the tenants' look, as ever, over every queue). Both
        update the plan's policy objects, once a claim. The job rows the walk locks come
        before any limit row the pick locks (Limits.budget): every lock taken on jobs while
        holding limit rows skips locked rows, so the two orders cannot deadlock."""
        priorities = plan.priorities
        lower: list[Candidate] = []
        if priorities is not None and (plan.per_class or priorities.owed):
            classes = {
                **self.due_classes(c),
                "floor": plan.floor,
                "known": self.known_classes(),
            }
            skip = set(outbox) | self.flow.paused_now(c)
            lower = self._lower_classes(
                c, classes, priorities, plan.per_class, limit, now, queues, tasks, skip, []
            )
        turns = plan.rotation
        tenants = (
            turns.due(lambda after: self._next_due_tenant(c, after, now, plan.floor))
            if turns is not None
            else []
        )
        return Looked(lower, tenants)

    def _next_due_tenant(
        self, c: Connection, after: str, now: datetime, floor: datetime | None
    ) -> str | None:
        row = c.one("next_due_tenant", after=after, now=now, floor=floor)
        return None if row is None else str(row["tenant"])

    def _rotated(
        self,
        c: Connection,
        classes: dict[str, Any],
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
                    **classes,
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
        classes: dict[str, Any],
        priorities: PriorityShare,
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
                **classes,
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

        walked = priorities.walk(read, per_class, limit)
        return [_candidate(read_rows[r.id]) for r in walked]  # with their limit keys

    def _weighted_behind(
        self,
        c: Connection,
        classes: dict[str, Any],
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
            **classes,
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

    def _limited(
        self,
        c: Connection,
        ids: Reserved,
        now: datetime,
        limit: int,
        worker_id: str,
        pick: dict[str, object],
    ) -> tuple[list[Row], datetime | None]:
        """Claim up to `limit` jobs within every limit, in the caller's transaction; `pick`
        holds the claim's filters (queues, tasks, outbox queues). The started rows, and when a
        limit allows a start again."""
        budget = self.limits.budget(c, now)
        classes = self.due_classes(c)
        chosen: list[int] = []
        seen: list[int] = []
        for _ in range(PICK_ROUNDS):
            want = limit - len(chosen)
            rows = c.rows(
                "claim_pick_limited",
                **classes,
                now=now,
                limit=want,
                skip=json.dumps(seen),
                **budget.filters(),
                **pick,
            )
            trimmed = False
            for r in rows:
                seen.append(r["id"])
                if budget.fits(r["limits"], r["attempts"]):
                    chosen.append(r["id"])
                    budget.take(r["limits"], r["attempts"])
                else:
                    trimmed = True
            if not trimmed or len(rows) < want or len(chosen) >= limit:
                break
        at = budget.next_start(now)
        if not chosen:
            return [], at
        claimed = c.rows(
            "claim_chosen",  # as a controlled claim starts its chosen jobs
            ids=chosen,
            moves=moves_json(Event.CLAIM),
            worker_id=worker_id,
            lease_seconds=None,  # each job's own
            now=now,
            **ids.params,
        )
        self.limits.spend(c, budget, claimed, now)
        return claimed, at


# the limits filters of claim_candidates when no limit exists: nothing blocked
NO_LIMITS = {"blocked": "[]", "retry_blocked": "[]"}


def _candidate(r: Row) -> Candidate:
    return Candidate(int(r["id"]), r["queue"], r["tenant"], r["limits"], int(r["attempts"]))

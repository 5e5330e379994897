"""The planner: turns schedules' due ticks into occurrences. Safe to run in every process.

Each pass handles every unpaused schedule whose next tick has come, one transaction per
schedule under its row lock (a schedule another planner holds is skipped this pass), and
releases buffered occurrences whose predecessor ended. Duplicates are impossible whatever the
number of planners: each occurrence's identity (schedule, nominal instant) is unique in the store.
PlannerService runs the passes on a node, after writing the schedules the app declares.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from duetime.core.clock import Clock
from duetime.core.schedules import Occurrence, Plan, Schedule, plan_due
from duetime.logs import log_event
from duetime.runtime.service import BlockingCalls, IntervalService, Pulse
from duetime.store.base import Store

log = logging.getLogger("duetime.planner")
worker_log = logging.getLogger("duetime.worker")  # schedule.synced is a worker event


@dataclass
class PlanResult:
    schedules: int = 0  # schedules whose due ticks were handled
    occurrences: int = 0  # jobs created (or found existing) for ticks
    released: int = 0  # waiting occurrences that may run now


class Planner:
    def __init__(self, store: Store, clock: Clock, *, batch: int = 100) -> None:
        self.store = store
        self.clock = clock
        self.batch = batch

    def run_once(self) -> PlanResult:
        now = self.clock.now()
        result = PlanResult()

        def decide(schedule: Schedule, active: list[Occurrence]) -> Plan:
            plan = plan_due(schedule, active, now)
            result.occurrences += len(plan.new_jobs)
            for tick in plan.ticks:
                log_event(
                    log,
                    f"tick.{tick.outcome}",
                    schedule=schedule.name,
                    nominal_at=tick.nominal_at.isoformat(),
                    detail=tick.detail,
                )
            return plan

        result.schedules = self.store.plan_due_schedules(now, self.batch, decide)
        result.released = self.store.release_waiting(now, self.batch)
        if result.released:
            log_event(log, "occurrences.released", count=result.released)
        return result


class PlannerService(IntervalService):
    """A planner pass every `interval` seconds, after `sync` (the app's sync_schedules) wrote
    the declared schedules at start. `created` fires after a pass that created or released
    occurrences, and `on_new_work` is called then, so claiming need not wait for its poll."""

    name = "planner"

    def __init__(
        self,
        planner: Planner,
        calls: BlockingCalls,
        interval: float = 1.0,
        *,
        sync: Callable[[], Mapping[str, str]] | None = None,
        on_new_work: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(interval)
        self.planner = planner
        self.calls = calls
        self.sync = sync
        self.on_new_work = on_new_work
        self.created = Pulse()

    async def start(self) -> None:
        if self.sync is not None:
            synced = await self.calls(self.sync)
            for name, action in synced.items():
                log_event(worker_log, "schedule.synced", schedule=name, action=action)

    async def run_once(self) -> None:
        result = await self.calls(self.planner.run_once)
        if result.occurrences or result.released:
            self.created.fire()
            if self.on_new_work is not None:
                self.on_new_work()

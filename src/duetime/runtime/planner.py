"""The planner: turns schedules' due ticks into occurrences. Safe to run in every process.

Each pass handles every unpaused schedule whose next tick has come, one transaction per
schedule under its row lock (a schedule another planner holds is skipped this pass), and
releases buffered occurrences whose predecessor ended. Duplicates are impossible whatever the
number of planners: each occurrence's identity (schedule, nominal instant) is unique in the store.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from duetime.core.clock import Clock
from duetime.core.schedules import Occurrence, Plan, Schedule, plan_due
from duetime.logs import log_event
from duetime.store.base import Store

log = logging.getLogger("duetime.planner")


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

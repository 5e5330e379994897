"""Priorities without starvation: PriorityShare keeps each lower priority class's minimum
share of one process's claims (docs/flow-control.md). Pure policy: no I/O; its state is the
runtime's (runtime/fairness.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.core.errors import InvalidRequest
from duetime.core.flow.rest import Rest

# the minimum share of a saturated worker's claimed slots each lower priority class keeps
PRIORITY_SHARE = 0.1
# lower classes served by one claim at most (the others get their turn in the next claims)
PRIORITY_CLASSES = 8
# after a claim found no lower class due, the next claims that do not look for one, and the
# time in which none looks (a drain claims every few milliseconds)
PRIORITY_IDLE = 8
PRIORITY_IDLE_TIME = timedelta(seconds=0.25)
# a priority above every job's (priority is a 32-bit integer): "below" it is every class
PRIORITY_TOP = 2**31


@dataclass(frozen=True)
class Ranked:
    """A due job of a priority class, as a reservation reads it (claim order)."""

    id: int
    priority: int
    queue: str = ""
    tenant: str = ""


def check_share(value: float) -> float:
    """A priority share: a fraction from 0 (strict priority order) below 1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise InvalidRequest(
            f"priority share must be a fraction from 0 up to (not including) 1, not {value!r}"
        )
    return float(value)


class PriorityShare:
    """Keeps each lower priority class's minimum share of one process's claims, deterministic.

    Each claim of `limit` slots earns share * limit slots of credit for every lower class;
    when the credit reaches a whole slot, the claim reserves that many slots (`per_class`)
    for each priority class below the highest due one, walking them downwards (`walk`): the
    oldest due jobs of each, read from the claim-order index. The rest of the claim's slots
    go to claim order as before, so no slot is left unused. When a claim found no lower class
    due (the common case: one class), the next PRIORITY_IDLE claims do not look, nor any
    within PRIORITY_IDLE_TIME of that look (on a clock that moves on); a claim that
    did not fill its slots (nothing more due) drops the credit: it took every due job, so the
    claims after it earn and reserve nothing until one fills its slots again."""

    def __init__(self, share: float = PRIORITY_SHARE) -> None:
        self.share = check_share(share)
        self.credit = 0.0
        # after a walk that found no lower class (a walk for what is owed alone dates from
        # the last reservation)
        self.rest = Rest(PRIORITY_IDLE, PRIORITY_IDLE_TIME)
        self.saturated = True  # the last claim filled its slots (or none was made yet)
        # slots owed to a lower class (by priority) that a walk cut short for lack of slots
        self.owed: dict[int, int] = {}

    def reserve(self, limit: int, now: datetime) -> int:
        """The slots this claim, at `now`, reserves for each lower class; 0 with nothing
        `owed`: the plain claim."""
        if self.share <= 0 or limit <= 0 or not self.saturated:
            return 0
        if self.rest.resting(now):
            return 0
        self.credit = min(self.credit + self.share * limit, 2.0 * limit)  # with a debt
        whole = int(self.credit + 1e-9)  # ten times 0.1 is a whole slot, whatever the float sum
        if whole <= 0:
            return 0
        self.credit -= whole
        return whole

    def walk(
        self, read: Callable[[int, int], Sequence[Ranked]], per_class: int, limit: int
    ) -> list[Ranked]:
        """The lower classes' jobs this claim takes first: `read(below, n)` returns up to n
        due jobs of priority below `below`, in claim order. Reads the highest due class, then
        walks down the classes below it (at most PRIORITY_CLASSES), taking up to per_class
        jobs of each plus what it is owed. When the claim's `limit` slots run out, each class
        below that got less than its due is owed the rest, paid first in the next walks."""
        top = read(PRIORITY_TOP, 1)
        if not top:
            return []
        highest = top[0].priority
        cursor = highest
        taken: list[Ranked] = []
        for cls in sorted(self.owed, reverse=True):  # first what earlier walks owe
            room_left = limit - len(taken)
            if room_left <= 0:
                break
            owed = self.owed.pop(cls)
            if cls >= highest:
                continue
            got = [r for r in read(cls + 1, min(owed, room_left)) if r.priority == cls]
            taken += got
            if got and len(got) < owed:
                self.owed[cls] = owed - len(got)
        for _ in range(PRIORITY_CLASSES if per_class > 0 else 0):
            room_left = limit - len(taken)
            # (the jobs already taken from what was owed are still due: read past them)
            rows = read(cursor, max(1, min(per_class, room_left)) + len(taken))
            rows = [r for r in rows if r.priority < highest and r.id not in {t.id for t in taken}]
            if not rows:
                break
            cls = rows[0].priority
            got = [r for r in rows if r.priority == cls][: max(0, min(per_class, room_left))]
            taken += got
            if len(got) < per_class and len(got) == max(0, room_left):  # cut short: owed
                self.owed[cls] = min(self.owed.get(cls, 0) + per_class - len(got), limit)
            cursor = cls
        if not taken and not self.owed:
            self.rest.found_nothing()
            self.credit = 0.0
        else:
            self.rest.found_some()
        return taken

    def claimed(self, limit: int, found: int) -> None:
        """After the claim: one that found fewer due jobs than its slots took every due job
        (`found`: the jobs it chose, some of which concurrent claims may have started first)."""
        self.saturated = found >= limit
        if not self.saturated:
            self.credit = 0.0
            self.owed.clear()

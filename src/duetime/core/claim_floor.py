"""Where a worker's claims start their walk of the due jobs (docs/performance.md, "The claim's
floor"). Pure policy: no I/O; its state is the runtime's (runtime/fairness.py).

A claim walks the due index of each priority class from its first entry. On PostgreSQL the
entries of the jobs claimed since the last vacuum are still there, dead; the walk steps over
each (and a transaction held open keeps every one of them for as long as it stays open, so
each claim's walk grows with the jobs claimed since it began). A claim that took fewer jobs
than it asked for took every due job of its filters, so the next can start near its instant:
at its floor, which the walk's index range starts at.
"""

from __future__ import annotations

from datetime import datetime, timedelta

# how far before the instant of the last claim that took every due job the next claims
# start: a job whose wake-up was lost and that committed a little after that claim read the
# table is found at once if it is due within it (a wake-up lowers the floor to its instant
# anyway, and the timer's looks below the floor find the rest). Under a transaction held
# open each claim steps over the entries of the jobs claimed within the margin, each read
# from the heap: 0.25 s of them at 1,000 jobs/s was the largest part of the claims' time
# (docs/performance.md, "The claim's move and the heartbeat after a vacuum").
FLOOR_MARGIN = timedelta(seconds=0.05)
# the longest time between two looks below the floor (the timer's, runtime/timer.py): they
# find what no wake-up told of (a claim of another worker rolled back, wake-ups lost while
# the feed was down) and lower the floor to it
FLOOR_CHECK_EVERY = timedelta(seconds=5)


class ClaimFloor:
    """One claimer's floor: `start(now)` before each claim (the floor to walk from, or None
    for the whole walk), `claimed(...)` after it, `heard(due_at)` for each wake-up and for
    what a look below the floor found.

    After a plain claim (Claimed.plain) that found fewer jobs than its limit, the floor is its
    instant less `margin`: nothing of the claimer's filters was due before then but jobs
    other transactions held (locked, or not yet committed). A claim that found its limit
    leaves the floor as it is (more may be due below where it stopped), and so does one that
    was not plain (a fairness detour or flow control, which walk from the floor too; limits
    per dependency, which walk from the start: jobs any of them held back stay due where they
    were, at or above the floor). Work that falls due
    before the floor (a child released, a sequence's next job, a resumed queue, a job enqueued
    to run in the past: their wake-ups name the instant) lowers it to that instant; a wake-up
    that names none drops it, and the claims walk from the first entry until one raises it
    again. What no wake-up told of, the claimer's timer finds below the floor, at most
    FLOOR_CHECK_EVERY later, and hands over the same way: the claims themselves never walk
    from the first entry while a floor is known (under a transaction held open, that walk
    steps over every job claimed since it began). A wake-up heard while a claim was under
    way keeps that claim from raising the floor (it may have read the table before the job
    was there). Not safe for threads by itself: its caller holds one lock around each call
    (the claims run in store threads, the wake-ups in the event loop: runtime/fairness.py)."""

    def __init__(self, margin: timedelta = FLOOR_MARGIN) -> None:
        if margin < timedelta(0):
            raise ValueError("the floor's margin must be 0 or more")
        self.margin = margin
        self.floor: datetime | None = None
        self._heard = 0  # wake-ups of work due before a claim under way could raise the floor
        self._started: tuple[datetime, int] | None = None  # the claim under way

    def start(self, now: datetime) -> datetime | None:
        """The floor of the claim about to run at `now` (None: it walks from the start)."""
        self._started = (now, self._heard)
        return self.floor

    def claimed(self, limit: int, found: int, plain: bool) -> None:
        """After the claim started last: it asked for `limit` jobs, found `found` due, and
        was the plain claim (`plain`: it walked from the floor given, taking every due job it
        could lock) or not."""
        started, self._started = self._started, None
        if started is None:
            return
        now, heard = started
        if not plain or found >= limit or heard != self._heard:
            return
        self.floor = now - self.margin

    def heard(self, due_at: datetime | None) -> None:
        """A wake-up (in another thread than the claims, maybe), or what a look below the
        floor found: work was enqueued or falls due (again) at `due_at` (None: unknown)."""
        under_way = self._started
        if under_way is not None and (due_at is None or due_at < under_way[0] - self.margin):
            self._heard += 1  # that claim may have read the table before this job was in
        if self.floor is not None and (due_at is None or due_at < self.floor):
            self.floor = due_at

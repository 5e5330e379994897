"""The SQL store's limits part: limits per dependency; the rules are in core/limits.py, the user's
view in docs/flow-control.md. A claim takes the limited path only while some limit exists (the
names are cached for LIMIT_NAMES_SECONDS): with none, the claim statement runs as it always
did. The limited path, in one transaction (the claim part's, store/sql/claim.py): lock every
limit row (in name order; SQLite's write lock already serialises), count each key's running
attempts (unexpired leases, and attempts held for the broker whose outbox event is unpublished:
no lease runs for them), work out what each key allows now (pause, concurrency, bucket,
breaker) and how many retries its budget allows; pick due jobs in claim order leaving out those
carrying a key that allows nothing (and the retries carrying a key whose budget is spent), keep
those every key of which still allows one more (the pick runs again, up to PICK_ROUNDS times,
when a key ran out on the way), claim them, take the tokens and count the starts and retries in
each key's window. A finish counts its outcome on the keys of its job (count_outcomes), which
moves their breakers.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from duetime.core.limits import (
    Counts,
    LimitSettings,
    LimitState,
    LimitStatus,
    Rate,
    after_claim,
    after_outcomes,
    allowance,
    breaker_allowance,
    check_limit_keys,
    check_settings,
    next_start,
    quoted,
    refilled,
    retry_allowance,
    take,
)
from duetime.core.outbox import DISPATCH_HOLDER
from duetime.store.driver import Connection, Driver, Row
from duetime.store.rows import json_list
from duetime.store.sql.cache import TtlCache
from duetime.store.sql.shared import Part, conflicts_retried

# how long a store trusts its copy of the limits' names: a first limit (or the last one's
# deletion) reaches other processes' claims within this. A change of an existing limit's
# settings applies at once (the limited path reads the rows in every claim).
LIMIT_NAMES_SECONDS = 1.0


class Limits(Part):
    """Limits per dependency: their settings, the copy of their names the claims read, and
    what a claim or a finish does to their rows (budget, spend, count_outcomes), each in the
    caller's transaction."""

    def __init__(self, driver: Driver, monotonic: Callable[[], float]) -> None:
        super().__init__(driver)
        self._limit_names: TtlCache[list[str]] = TtlCache(LIMIT_NAMES_SECONDS, monotonic)

    def limit_names(self) -> list[str]:
        """The keys with a limit row, read at most LIMIT_NAMES_SECONDS ago."""
        names = self._fresh_names()
        if names is None:
            with self.driver.transaction(write=False) as c:
                names = self._read_names(c)
        return names

    def exists(self, c: Connection) -> bool:
        """Whether any limit exists, as limit_names() says, read in the caller's transaction
        when the cached names are stale (a store's connection holds one transaction)."""
        names = self._fresh_names()
        return bool(names if names is not None else self._read_names(c))

    def _fresh_names(self) -> list[str] | None:
        return self._limit_names.fresh()

    def _read_names(self, c: Connection) -> list[str]:
        at = self._limit_names.now()
        return self._limit_names.put([r["name"] for r in c.rows("limit_names")], at)

    # -- settings ---------------------------------------------------------------------------

    def limits(self, now: datetime) -> list[LimitStatus]:
        with self.driver.transaction(snapshot=True) as c:
            rows = c.rows("limit_rows")
            running = _per_key(c.rows("limit_running", now=now, holder=DISPATCH_HOLDER), "running")
            waiting_rows = c.rows("limit_waiting", now=now)
        waiting = _per_key(waiting_rows, "waiting")
        oldest: dict[str, datetime] = {}
        for r in waiting_rows:
            at = self._t(r["oldest_due_at"])
            for key in json_list(r["limits"]):
                oldest[key] = min(oldest.get(key, at), at)
        found = []
        for r in rows:
            settings, state = self._limit(r)
            found.append(
                LimitStatus(
                    settings,
                    state,
                    self._t(r["updated_at"]),
                    running[settings.key],
                    waiting[settings.key],
                    refilled(settings, state, now),
                    oldest.get(settings.key),
                )
            )
        return found

    @conflicts_retried
    def set_limit(self, settings: LimitSettings, now: datetime) -> None:
        check_settings(settings)
        rate = settings.rate
        with self.driver.transaction() as c:
            c.run(
                "upsert_limit",
                name=settings.key,
                rate_count=rate.count if rate is not None else None,
                rate_period=rate.period if rate is not None else None,
                burst=settings.burst,
                concurrency=settings.concurrency,
                retry_budget=settings.retry_budget,
                breaker_threshold=settings.breaker_threshold,
                breaker_cooldown=settings.breaker_cooldown,
                now=now,
            )
        self._limit_names.clear()  # this process's claims see it at once

    @conflicts_retried
    def delete_limit(self, key: str) -> bool:
        with self.driver.transaction() as c:
            deleted = c.run("delete_limit", name=key) > 0
        self._limit_names.clear()
        return deleted

    @conflicts_retried
    def pause_limits(self, keys: Sequence[str], until: datetime, now: datetime) -> None:
        """Nothing carrying one of `keys` starts before `until` (a longer pause stays)."""
        names = check_limit_keys(keys)
        if not names:
            return
        with self.driver.transaction() as c:
            for name in names:  # in name order, as the claims lock them
                c.run("pause_limit", name=name, until=until, now=now)
        self._limit_names.clear()

    def _limit(self, r: Row) -> tuple[LimitSettings, LimitState]:
        rate = None
        if r["rate_count"] is not None and r["rate_period"] is not None:
            rate = Rate(float(r["rate_count"]), float(r["rate_period"]))
        settings = LimitSettings(
            key=r["name"],
            rate=rate,
            burst=r["burst"],
            concurrency=r["concurrency"],
            retry_budget=_opt_float(r["retry_budget"]),
            breaker_threshold=_opt_float(r["breaker_threshold"]),
            breaker_cooldown=_opt_float(r["breaker_cooldown"]),
        )
        state = LimitState(
            tokens=_opt_float(r["tokens"]),
            refilled_at=self._opt_time(r["refilled_at"]),
            paused_until=self._opt_time(r["paused_until"]),
            window_at=self._opt_time(r["window_at"]),
            current=Counts(
                r["cur_starts"], r["cur_retries"], r["cur_failures"], r["cur_successes"]
            ),
            previous=Counts(
                r["prev_starts"], r["prev_retries"], r["prev_failures"], r["prev_successes"]
            ),
            breaker=r["breaker"],
            breaker_until=self._opt_time(r["breaker_until"]),
        )
        return settings, state

    def _opt_time(self, value: object) -> datetime | None:
        return None if value is None else self._t(value)

    def _save(self, c: Connection, states: dict[str, LimitState]) -> None:
        """Write the state of each key (in name order)."""
        if not states:
            return
        c.run_many(
            "save_limit_state",
            [
                {
                    "name": key,
                    "tokens": st.tokens,
                    "refilled_at": st.refilled_at,
                    "window_at": st.window_at,
                    "cur_starts": st.current.starts,
                    "cur_retries": st.current.retries,
                    "cur_failures": st.current.failures,
                    "cur_successes": st.current.successes,
                    "prev_starts": st.previous.starts,
                    "prev_retries": st.previous.retries,
                    "prev_failures": st.previous.failures,
                    "prev_successes": st.previous.successes,
                    "breaker": st.breaker,
                    "breaker_until": st.breaker_until,
                }
                for key, st in sorted(states.items())
            ],
        )

    def count_outcomes(self, c: Connection, ended: dict[int, bool], now: datetime) -> None:
        """Count ended attempts (job id: failed) on the limits their jobs carry, and move
        those keys' breakers; in the finishing transaction, after the jobs' rows (every
        writer locks a job before a limit, except claims, which skip locked jobs)."""
        if not ended or not self.exists(c):
            return
        rows = c.rows("job_limits", ids=sorted(ended))
        if not rows:
            return
        failures: Counter[str] = Counter()
        successes: Counter[str] = Counter()
        for r in rows:
            for key in json_list(r["limits"]):
                (failures if ended[r["id"]] else successes)[key] += 1
        names = sorted(set(failures) | set(successes))
        states = {}
        for settings, state in map(self._limit, c.rows("lock_limits_named", names=names)):
            key = settings.key
            states[key] = after_outcomes(settings, state, failures[key], successes[key], now)
        self._save(c, states)

    # -- the claim's limited path -------------------------------------------------------------

    def budget(self, c: Connection, now: datetime) -> LimitBudget:
        """Lock every limit row (in name order) and work out what each key allows now."""
        limits = {s.key: (s, st) for s, st in map(self._limit, c.rows("lock_limits"))}
        running = _per_key(c.rows("limit_running", now=now, holder=DISPATCH_HOLDER), "running")
        budget = LimitBudget(limits, running=running)
        for key, (settings, state) in limits.items():
            bounds = [
                allowance(settings, state, running[key], now),
                breaker_allowance(settings, state, running[key], now),
            ]
            known = [n for n in bounds if n is not None]
            if known:
                budget.allowed[key] = min(known)
            retries = retry_allowance(settings, state, now)
            if retries is not None:
                budget.retry_left[key] = retries
        return budget

    def spend(
        self, c: Connection, budget: LimitBudget, claimed: Sequence[Row], now: datetime
    ) -> None:
        """After a claim: take the tokens of the jobs it started and count their starts and
        retries in each key's window."""
        started: Counter[str] = Counter()
        restarted: Counter[str] = Counter()
        for r in claimed:
            keys = budget.keys(r["limits"])
            started.update(keys)
            if r["attempts"] > 1:  # attempts counts this one: a retry
                restarted.update(keys)
        states = {}
        for key in started:
            settings, state = budget.limits[key]
            state = take(settings, state, started[key], now)
            states[key] = after_claim(state, started[key], restarted[key], now)
        self._save(c, states)


@dataclass
class LimitBudget:
    """What each limit key allows within one claim: starts (concurrency, bucket, pause,
    breaker) and retries (budget), less what the claim has taken so far."""

    limits: dict[str, tuple[LimitSettings, LimitState]]
    allowed: dict[str, int] = field(default_factory=dict)  # starts of each bounded key
    retry_left: dict[str, int] = field(default_factory=dict)  # retries of each budgeted key
    taken: Counter[str] = field(default_factory=Counter)
    retried: Counter[str] = field(default_factory=Counter)
    running: Counter[str] = field(default_factory=Counter)  # each key's attempts at the claim

    def next_start(self, now: datetime) -> datetime | None:
        """The earliest instant at which a key that allows no more starts after this claim
        (what it took counted) allows one again, where known (core/limits.next_start)."""
        found = []
        for key, n in self.allowed.items():
            if n - self.taken[key] > 0:
                continue
            settings, state = self.limits[key]
            if self.taken[key]:
                state = take(settings, state, self.taken[key], now)
            at = next_start(settings, state, self.running[key] + self.taken[key], now)
            if at is not None:
                found.append(at)
        return min(found, default=None)

    def keys(self, limits_text: object) -> list[str]:
        """The keys of a job's limits text that have a limit row."""
        return [k for k in json_list(limits_text) if k in self.limits]

    def filters(self) -> dict[str, str]:
        """The pick's parameters: the keys that allow no start (blocked) and no retry
        (retry_blocked), as JSON arrays of the quoted keys looked for in the limits text."""
        blocked = [quoted(k) for k, n in self.allowed.items() if n - self.taken[k] <= 0]
        no_retry = [quoted(k) for k, n in self.retry_left.items() if n - self.retried[k] <= 0]
        return {
            "blocked": json.dumps(sorted(blocked)),
            "retry_blocked": json.dumps(sorted(no_retry)),
        }

    def fits(self, limits_text: object, attempts: int) -> bool:
        """Whether every key of the job still allows it one more start (and, for a retry,
        one more retry)."""
        keys = self.keys(limits_text)
        if any(self.allowed[k] - self.taken[k] <= 0 for k in keys if k in self.allowed):
            return False
        retry = attempts > 0
        return not (
            retry
            and any(self.retry_left[k] - self.retried[k] <= 0 for k in keys if k in self.retry_left)
        )

    def fitting(self, jobs: Sequence[tuple[int, object, int]]) -> set[int]:
        """The ids of `jobs` (id, limits text, attempts; in claim order) that could all start
        together with what was taken so far: each is counted against its keys in turn."""
        trial = LimitBudget(self.limits, self.allowed, self.retry_left, running=self.running)
        trial.taken, trial.retried = Counter(self.taken), Counter(self.retried)
        ids = set()
        for job_id, limits_text, attempts in jobs:
            if trial.fits(limits_text, attempts):
                trial.take(limits_text, attempts)
                ids.add(job_id)
        return ids

    def take(self, limits_text: object, attempts: int) -> None:
        keys = self.keys(limits_text)
        self.taken.update(keys)
        if attempts > 0:
            self.retried.update(keys)


def _per_key(rows: Sequence[Row], column: str) -> Counter[str]:
    """Figures grouped by limits text, added up per key."""
    found: Counter[str] = Counter()
    for r in rows:
        for key in json_list(r["limits"]):
            found[key] += int(r[column])
    return found


def _opt_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


__all__ = ["LIMIT_NAMES_SECONDS", "LimitBudget", "Limits"]

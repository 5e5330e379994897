"""Operator actions shared by the API, the CLI and the dashboard: tokens, stats, bulk replay.

They act on anything with a store and a clock (a `Backend`, such as duetime.App), so this
module sits below the App facade and never imports it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from duetime.core.clock import Clock
from duetime.core.durations import parse_duration
from duetime.core.errors import BacklogFull, DuetimeError, InvalidRequest, JobNotFound
from duetime.core.flow import (
    KEEP,
    FlowCounts,
    Keep,
    QueueFlow,
    TenantFlow,
    TenantSettings,
    check_limit,
    check_weight,
)
from duetime.core.models import JobFilter
from duetime.core.outbox import QueueSettings
from duetime.core.requests import TENANT_LIMIT, check_url_name
from duetime.core.states import Event, JobStatus
from duetime.core.stats import Stats, summarize
from duetime.core.tokens import (
    PREFIX_CHARS,
    ApiToken,
    Role,
    hash_secret,
    new_secret,
    new_session_id,
    parse_role,
)
from duetime.logs import log_event
from duetime.store.base import Store

log = logging.getLogger("duetime.operators")

SAMPLE_LIMIT = 100_000  # attempts read for one stats call (the newest in the last hour)
MAX_BULK = 100_000


class Backend(Protocol):
    """What an operator action acts on: a store and the clock that says `now` (an App)."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...


# -- tokens ---------------------------------------------------------------------------------


def create_token(
    app: Backend,
    tenant: str,
    role: Role | str,
    name: str = "",
    *,
    expires_in: timedelta | None = None,
) -> tuple[ApiToken, str]:
    """A new token and its secret; the secret is shown once and only its hash is kept.
    With `expires_in` the token is refused from that long after now."""
    check_url_name(tenant, "tenant", TENANT_LIMIT)  # the same rule as the jobs the token creates
    if expires_in is not None:  # at most 100 years, as every duration
        expires_in = parse_duration(expires_in, "a token's expiry")
    if expires_in is not None and expires_in <= timedelta(0):
        raise InvalidRequest("a token's expiry must be in the future, such as 30d or 12h")
    secret = new_secret()
    now = app.clock.now()
    token = app.store.create_token(
        tenant=tenant,
        role=parse_role(str(role)),
        name=name,
        prefix=secret[:PREFIX_CHARS],
        secret_hash=hash_secret(secret),
        now=now,
        expires_at=now + expires_in if expires_in is not None else None,
    )
    log_event(log, "token.created", token_id=token.id, tenant=tenant, role=str(token.role))
    return token, secret


@dataclass(frozen=True)
class Verdict:
    """What a presented secret (a token or a dashboard session) is worth: the token it
    proves, or None and why not, in words a caller can show."""

    token: ApiToken | None
    refused: str = ""  # "", "unknown", "revoked" or "expired"
    reason: str = ""


def _judge(token: ApiToken | None, now: datetime, unknown: str) -> Verdict:
    if token is None:
        return Verdict(None, "unknown", unknown)
    if token.revoked_at is not None:
        revoked = f"token {token.prefix}... was revoked at {_iso(token.revoked_at)}"
        return Verdict(None, "revoked", revoked)
    if token.expires_at is not None and token.expired(now):
        expired = (
            f"token {token.prefix}... expired at {_iso(token.expires_at)}; "
            "create a new one with `duetime tokens create`"
        )
        return Verdict(None, "expired", expired)
    return Verdict(token)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_token(app: Backend, secret: str) -> Verdict:
    """The token with this secret if it may be used now (not revoked, not expired)."""
    now = app.clock.now()
    return _judge(app.store.find_token(hash_secret(secret), now), now, "unknown token")


def authenticate(app: Backend, secret: str) -> ApiToken | None:
    """The usable token with this secret, or None (unknown, revoked or expired)."""
    return check_token(app, secret).token


# -- dashboard sessions ---------------------------------------------------------------------

SESSION_LIFETIME = timedelta(hours=12)  # a dashboard login lasts at most this long


def start_session(app: Backend, token: ApiToken) -> str:
    """A new dashboard session for a token: the id for the cookie (only its hash is stored).
    It ends at logout, after SESSION_LIFETIME, or when the token is revoked or expires."""
    now = app.clock.now()
    expires = now + SESSION_LIFETIME
    if token.expires_at is not None:
        expires = min(expires, token.expires_at)
    session_id = new_session_id()
    app.store.create_session(
        secret_hash=hash_secret(session_id), token_id=token.id, now=now, expires_at=expires
    )
    log_event(log, "session.started", token_id=token.id, tenant=token.tenant)
    return session_id


def check_session(app: Backend, session_id: str) -> Verdict:
    """The token behind a dashboard session, if the session and the token are both usable."""
    now = app.clock.now()
    token = app.store.find_session(hash_secret(session_id), now)
    return _judge(token, now, "the session ended (logged out or expired)")


def end_session(app: Backend, session_id: str) -> None:
    """Log a dashboard session out: its id stops working at once, wherever it was copied."""
    app.store.end_session(hash_secret(session_id))


def revoke_token(app: Backend, token_id: int) -> ApiToken:
    token = app.store.revoke_token(token_id, app.clock.now())
    if token is None:
        raise InvalidRequest(f"token {token_id} does not exist; `duetime tokens list` shows ids")
    log_event(log, "token.revoked", token_id=token.id, tenant=token.tenant)
    return token


# -- figures --------------------------------------------------------------------------------


def stats(app: Backend, tenant: str | None) -> Stats:
    """Counts by status and queue, oldest overdue age, lag and throughput (5 and 60 min)."""
    now = app.clock.now()
    store = app.store
    samples = store.attempt_samples(tenant, now - timedelta(hours=1), SAMPLE_LIMIT)
    summary = summarize(
        now,
        store.job_counts(tenant),
        store.oldest_overdue(tenant, now),
        samples,
        sample_limit=SAMPLE_LIMIT,
    )
    found = store.flow_counts(now)  # backlog, running and waiting per queue and tenant
    return replace(
        summary,
        queues=tuple(queue_flows(app, tenant, found)),
        tenants=tuple(tenant_flows(app, tenant, found)),
    )


# -- bulk replay ----------------------------------------------------------------------------


@dataclass
class ReplayReport:
    matched: int = 0
    replayed: list[int] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (job id, why)
    stopped: str | None = None  # why it stopped before the end: a full backlog

    def to_json(self) -> dict[str, object]:
        return {
            "matched": self.matched,
            "replayed": len(self.replayed),
            "replayed_ids": self.replayed,
            "skipped": [{"id": i, "reason": why} for i, why in self.skipped],
            "stopped": self.stopped,
        }


def dead_job_ids(
    app: Backend,
    tenant: str | None,
    *,
    task: str | None = None,
    queue: str | None = None,
    limit: int = MAX_BULK,
) -> list[int]:
    """Ids of dead jobs matching a filter, oldest first."""
    ids: list[int] = []
    before: int | None = None
    while len(ids) < limit:
        page = app.store.list_jobs(
            JobFilter(
                tenant=tenant,
                status=JobStatus.DEAD,
                task=task,
                queue=queue,
                before_id=before,
                limit=min(500, limit - len(ids)),
            )
        )
        if not page:
            break
        ids.extend(j.id for j in page)
        before = page[-1].id
    return sorted(ids)


def replay_many(
    app: Backend,
    ids: Sequence[int],
    *,
    tenant: str | None,
    per_second: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    ignore_backlog: bool = False,
) -> ReplayReport:
    """Replay jobs one by one, at most `per_second` a second; a job that cannot be replayed
    (gone, another tenant's, no longer dead) is skipped with its reason, never fatal.

    A replay is admitted like an enqueue (Store.transition): at a full backlog the replay
    stops, the jobs not replayed are skipped with the reason, and `stopped` says it; when
    none was replayed it raises BacklogFull, as an enqueue would. `ignore_backlog` replays
    past the max backlogs (an operator's override)."""
    if per_second is not None and per_second <= 0:
        raise InvalidRequest("per_second must be more than 0 (or left out for no pacing)")
    if len(ids) > MAX_BULK:
        raise InvalidRequest(f"at most {MAX_BULK} jobs per bulk replay; narrow the filter")
    report = ReplayReport(matched=len(ids))
    interval = 1.0 / per_second if per_second else 0.0
    started = time.monotonic()
    for n, job_id in enumerate(ids, start=1):
        try:
            current = app.store.get_job(job_id, tenant=tenant)
            if current is None:
                raise JobNotFound(job_id)
            if current.status is not JobStatus.DEAD:
                raise InvalidRequest(f"job {job_id} is {current.status}, not dead")
            if interval:  # pace the replays themselves; a skipped job costs no time
                wait = started + len(report.replayed) * interval - time.monotonic()
                if wait > 0:
                    sleep(wait)
            job = app.store.transition(
                job_id, Event.REPLAY, app.clock.now(), tenant=tenant, ignore_backlog=ignore_backlog
            )
            report.replayed.append(job.id)
        except BacklogFull as exc:
            if not report.replayed:
                raise
            report.stopped = str(exc)
            report.skipped.append((job_id, str(exc)))
            why = (
                f"not tried: the replay stopped at job {job_id}, its {exc.kind} {exc.name!r} "
                f"being at its max backlog of {exc.limit}"
            )
            report.skipped.extend((i, why) for i in ids[n:])
            if progress is not None:
                progress(len(ids), len(ids))
            break
        except DuetimeError as exc:
            report.skipped.append((job_id, str(exc)))
        if progress is not None:
            progress(n, len(ids))
    log_event(log, "jobs.bulk_replayed", replayed=len(report.replayed), skipped=len(report.skipped))
    return report


# -- flow control of queues and tenants (docs/flow-control.md) ------------------------------


Counts = list[tuple[str, str, FlowCounts]]


def queue_flows(app: Backend, tenant: str | None, found: Counts | None = None) -> list[QueueFlow]:
    """Every queue with settings or waiting/running jobs: its settings, backlog, running and
    waiting. With `tenant`, only the queues holding that tenant's waiting or running jobs,
    counting only them: a tenant sees no queue that only other tenants use. By name."""
    store = app.store
    settings = {q.queue: q for q in store.queue_settings()}
    counts: dict[str, FlowCounts] = {}
    for queue, owner, c in store.flow_counts(app.clock.now()) if found is None else found:
        if tenant is None or owner == tenant:
            counts[queue] = counts.get(queue, FlowCounts()) + c
    names = sorted(set(settings) | set(counts)) if tenant is None else sorted(counts)
    return [
        QueueFlow(settings.get(name, QueueSettings(name)), counts.get(name, FlowCounts()))
        for name in names
    ]


def tenant_flows(app: Backend, tenant: str | None, found: Counts | None = None) -> list[TenantFlow]:
    """Every tenant with settings or waiting/running jobs (only `tenant`, when given): its
    settings, backlog, running and waiting. By name."""
    store = app.store
    settings = {t.tenant: t for t in store.tenant_settings()}
    counts: dict[str, FlowCounts] = {}
    for _, owner, c in store.flow_counts(app.clock.now()) if found is None else found:
        counts[owner] = counts.get(owner, FlowCounts()) + c
    names = sorted(set(settings) | set(counts))
    return [
        TenantFlow(settings.get(name, TenantSettings(name)), counts.get(name, FlowCounts()))
        for name in names
        if tenant is None or name == tenant
    ]


def set_queue_flow(
    app: Backend,
    name: str,
    *,
    paused: bool | None = None,
    concurrency: int | Keep | None = KEEP,
    max_backlog: int | Keep | None = KEEP,
    weight: float | None = None,
) -> QueueSettings:
    """Pause or resume a queue, or change its limits (KEEP/None: see Store.set_queue)."""
    queue = check_url_name(name, "queue", 100)
    settings = app.store.set_queue(
        queue,
        app.clock.now(),
        paused=paused,
        concurrency=_limit(concurrency, "concurrency"),
        max_backlog=_limit(max_backlog, "max_backlog"),
        weight=check_weight(weight),
    )
    log_event(log, "queue.set", queue=queue, **_changed(paused, concurrency, max_backlog, weight))
    return settings


def set_tenant_flow(
    app: Backend,
    name: str,
    *,
    concurrency: int | Keep | None = KEEP,
    max_backlog: int | Keep | None = KEEP,
    weight: float | None = None,
) -> TenantSettings:
    """Change a tenant's limits (KEEP/None: see Store.set_tenant)."""
    tenant = check_url_name(name, "tenant", TENANT_LIMIT)
    settings = app.store.set_tenant(
        tenant,
        app.clock.now(),
        concurrency=_limit(concurrency, "concurrency"),
        max_backlog=_limit(max_backlog, "max_backlog"),
        weight=check_weight(weight),
    )
    log_event(log, "tenant.set", tenant=tenant, **_changed(None, concurrency, max_backlog, weight))
    return settings


def _limit(value: int | Keep | None, what: str) -> int | Keep | None:
    return value if isinstance(value, Keep) else check_limit(value, what)


def _changed(
    paused: bool | None,
    concurrency: int | Keep | None,
    max_backlog: int | Keep | None,
    weight: float | None,
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if paused is not None:
        fields["paused"] = paused
    if not isinstance(concurrency, Keep):
        fields["concurrency"] = concurrency
    if not isinstance(max_backlog, Keep):
        fields["max_backlog"] = max_backlog
    if weight is not None:
        fields["weight"] = weight
    return fields

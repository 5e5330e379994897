"""Tokens and the figures behind /v1/stats, on both stores."""

from __future__ import annotations

from datetime import timedelta

from duetime.core.clock import ManualClock
from duetime.core.models import Job, JobFilter, Outcome
from duetime.core.states import AttemptStatus, Event
from duetime.core.stats import summarize
from duetime.core.tokens import Role, hash_secret, new_secret
from duetime.store.base import Store
from jobhelpers import claim_one, enqueue


def test_tokens_are_stored_by_hash_found_and_revoked(store: Store, clock: ManualClock) -> None:
    secret = new_secret()
    token = store.create_token(
        tenant="acme",
        role=Role.WRITE,
        name="deploy",
        prefix=secret[:10],
        secret_hash=hash_secret(secret),
        now=clock.now(),
    )
    assert token.tenant == "acme" and token.role is Role.WRITE and token.active
    found = store.find_token(hash_secret(secret), clock.now())
    assert found is not None and found.id == token.id and found.last_used_at == clock.now()
    assert store.find_token(hash_secret(secret + "x"), clock.now()) is None
    other = store.create_token(
        tenant="globex",
        role=Role.READ,
        name="",
        prefix="dt_other",
        secret_hash=hash_secret("other"),
        now=clock.now(),
    )
    assert [t.id for t in store.list_tokens("acme")] == [token.id]
    assert [t.id for t in store.list_tokens(None)] == [token.id, other.id]
    clock.advance(5)
    revoked = store.revoke_token(token.id, clock.now())
    assert revoked is not None and revoked.revoked_at == clock.now() and not revoked.active
    clock.advance(5)
    again = store.revoke_token(token.id, clock.now())
    assert again is not None and again.revoked_at == revoked.revoked_at  # idempotent
    assert store.revoke_token(999_999, clock.now()) is None
    found = store.find_token(hash_secret(secret), clock.now())
    assert found is not None and not found.active


def test_a_token_keeps_its_expiry(store: Store, clock: ManualClock) -> None:
    expires = clock.now() + timedelta(days=30)
    token = store.create_token(
        tenant="acme",
        role=Role.READ,
        name="",
        prefix="dt_exp",
        secret_hash=hash_secret("expiring"),
        now=clock.now(),
        expires_at=expires,
    )
    assert token.expires_at == expires and token.usable(clock.now())
    found = store.find_token(hash_secret("expiring"), clock.now() + timedelta(days=31))
    assert found is not None and found.expires_at == expires
    assert found.state(clock.now() + timedelta(days=31)) == "expired"
    assert store.list_tokens("acme")[0].expires_at == expires


def test_dashboard_sessions_are_stored_by_hash_found_ended_and_expire(
    store: Store, clock: ManualClock
) -> None:
    token = store.create_token(
        tenant="acme",
        role=Role.WRITE,
        name="",
        prefix="dt_s",
        secret_hash=hash_secret("token"),
        now=clock.now(),
    )
    for session in ("one", "two"):
        store.create_session(
            secret_hash=hash_secret(session),
            token_id=token.id,
            now=clock.now(),
            expires_at=clock.now() + timedelta(hours=1),
        )
    found = store.find_session(hash_secret("one"), clock.now())
    assert found is not None and found.id == token.id and found.last_used_at == clock.now()
    assert store.find_session(hash_secret("three"), clock.now()) is None
    store.end_session(hash_secret("one"))
    assert store.find_session(hash_secret("one"), clock.now()) is None
    assert store.find_session(hash_secret("two"), clock.now()) is not None, "only that one"
    store.end_session(hash_secret("one"))  # ending an ended session is no error
    # a revoked token's session still names it: the caller refuses it
    store.revoke_token(token.id, clock.now())
    revoked = store.find_session(hash_secret("two"), clock.now())
    assert revoked is not None and not revoked.active
    clock.advance(3600)
    assert store.find_session(hash_secret("two"), clock.now()) is None, "expired"


def test_attempts_record_when_they_were_due(store: Store, clock: ManualClock) -> None:
    job = enqueue(store, clock, delay=10)
    clock.advance(12.5)
    claimed, _lease = claim_one(store, clock)
    attempt = store.get_job(claimed.id)
    assert attempt is not None
    first = attempt.attempt_history[0]
    assert first.due_at == job.due_at
    assert first.lag_seconds == 2.5


def test_figures_count_statuses_lag_and_throughput(store: Store, clock: ManualClock) -> None:
    for _ in range(3):
        enqueue(store, clock)
    enqueue(store, clock, queue="mail", tenant="other")
    clock.advance(4)
    _job, lease = claim_one(store, clock)
    clock.advance(1)
    store.finish(lease, Outcome(Event.SUCCEED), clock.now())
    counts = {(c.status, c.queue): c.count for c in store.job_counts("default")}
    assert counts == {("scheduled", "default"): 2, ("succeeded", "default"): 1}
    everyone = {(c.status, c.queue): c.count for c in store.job_counts(None)}
    assert everyone[("scheduled", "mail")] == 1
    overdue = store.oldest_overdue("default", clock.now())
    assert overdue is not None and (clock.now() - overdue).total_seconds() == 5
    assert store.oldest_overdue("nobody", clock.now()) is None

    samples = store.attempt_samples("default", clock.now() - timedelta(hours=1), 1000)
    assert len(samples) == 1
    assert samples[0].status is AttemptStatus.SUCCEEDED and samples[0].lag == 4
    stats = summarize(clock.now(), store.job_counts("default"), overdue, samples)
    five = stats.windows[0]
    assert (five.minutes, five.succeeded, five.started, five.lag_p50) == (5, 1, 1, 4.0)
    assert sum(p.succeeded for p in stats.series) == 1
    assert store.attempt_samples("other", clock.now() - timedelta(hours=1), 1000) == []


def ran(
    store: Store, clock: ManualClock, tenant: str, outcome: Outcome, key: str | None = None
) -> Job:
    """A job of `tenant` claimed now and ended a second later with `outcome` (a job with an
    idempotency key that succeeds keeps its row in the jobs table; others move to history)."""
    job = enqueue(store, clock, tenant=tenant, **({} if key is None else {"key": key}))
    claimed, lease = claim_one(store, clock)
    assert claimed.id == job.id
    clock.advance(1)
    assert store.finish(lease, outcome, clock.now())
    return job


def test_the_samples_are_the_newest_attempts_started_since_of_the_tenant_asked(
    store: Store, clock: ManualClock
) -> None:
    """attempt_samples: the attempts started since `since`, newest start first, at most
    `limit`, of the tenant asked (every tenant's with None). A success that started before
    `since` is not one, though it ended after it; another tenant's newer successes and
    failures do not crowd a tenant's out of its limit; successes kept in either table and
    ended attempts' rows are sampled alike."""
    succeed = Outcome(Event.SUCCEED)
    enqueue(store, clock)
    _claimed, early_lease = claim_one(store, clock)
    clock.advance(1)
    since = clock.now()
    clock.advance(1)
    assert store.finish(early_lease, succeed, clock.now())  # started before since
    retry = Outcome(Event.RETRY, due_at=clock.now() + timedelta(hours=1))
    mine = [
        ran(store, clock, "default", succeed),
        ran(store, clock, "default", retry),
        ran(store, clock, "default", succeed, key="kept-on-its-row"),
        ran(store, clock, "default", succeed),
    ]
    theirs = [ran(store, clock, "other", retry) for _ in range(3)]
    theirs += [ran(store, clock, "other", succeed, key=f"kept-{i}") for i in range(2)]
    theirs.append(ran(store, clock, "other", succeed))

    def started(tenant: str | None, limit: int) -> list[tuple[str, float]]:
        found = store.attempt_samples(tenant, since, limit)
        return [(s.status.value, (s.started_at - since).total_seconds()) for s in found]

    # each job started a second after the one before it: mine 1 to 4 s past since, theirs 5
    # to 10 (three failures, then three successes)
    assert started("default", 10) == [
        ("succeeded", 4.0), ("succeeded", 3.0), ("failed", 2.0), ("succeeded", 1.0)
    ]  # fmt: skip
    assert started("default", 2) == [("succeeded", 4.0), ("succeeded", 3.0)]
    assert started("default", 3) == [("succeeded", 4.0), ("succeeded", 3.0), ("failed", 2.0)]
    assert started("other", 2) == [("succeeded", 10.0), ("succeeded", 9.0)]
    assert started(None, 4) == [
        ("succeeded", 10.0), ("succeeded", 9.0), ("succeeded", 8.0), ("failed", 7.0)
    ]  # fmt: skip
    assert len(store.attempt_samples(None, since, 100)) == len(mine) + len(theirs)


def test_jobs_can_be_listed_by_due_time(store: Store, clock: ManualClock) -> None:
    early = enqueue(store, clock, delay=10)
    late = enqueue(store, clock, delay=100)
    found = store.list_jobs(
        JobFilter(due_after=clock.now() + timedelta(seconds=50), due_before=None)
    )
    assert [j.id for j in found] == [late.id]
    found = store.list_jobs(JobFilter(due_before=clock.now() + timedelta(seconds=50)))
    assert [j.id for j in found] == [early.id]

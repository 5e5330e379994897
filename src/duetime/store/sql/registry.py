"""The SQL store's registry part: worker nodes, API tokens and sessions, and figures."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

from duetime.core.models import Node
from duetime.core.stats import AttemptSample, JobCount
from duetime.core.tokens import ApiToken, Role
from duetime.store.rows import (
    json_list,
    sample_from_row,
    token_from_row,
)
from duetime.store.sql.shared import (
    Part,
    conflicts_retried,
)


class Registry(Part):
    # -- nodes ------------------------------------------------------------------------------

    @conflicts_retried
    def register_node(self, node: Node, now: datetime) -> None:
        with self.driver.transaction() as c:
            c.run(
                "upsert_node",
                id=node.id,
                hostname=node.hostname,
                pid=node.pid,
                queues=json.dumps(list(node.queues)) if node.queues is not None else None,
                concurrency=node.concurrency,
                duties=json.dumps(list(node.duties)),
                version=node.version,
                now=now,
                tasks=json.dumps(list(node.tasks)) if node.tasks is not None else None,
                clock_offset=node.clock_offset,
            )

    @conflicts_retried
    def touch_node(self, node_id: str, now: datetime, clock_offset: float | None = None) -> None:
        with self.driver.transaction() as c:
            c.run("touch_node", id=node_id, now=now, clock_offset=clock_offset)

    @conflicts_retried
    def stop_node(self, node_id: str, now: datetime) -> None:
        with self.driver.transaction() as c:
            c.run("stop_node", id=node_id, now=now)

    @conflicts_retried
    def take_turn(self, duty: str, holder: str, every: float) -> bool:
        with self.driver.transaction() as c:
            if c.run("take_turn", duty=duty, holder=holder, every=every):
                return True
            # the duty's first pass ever inserts its row; a row there (another node's
            # recent pass, the usual case) makes it insert nothing
            return c.run("first_turn", duty=duty, holder=holder) == 1

    def list_nodes(self, limit: int = 200) -> list[Node]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("list_nodes", limit=limit)
        t = self._t
        return [
            Node(
                id=r["id"],
                hostname=r["hostname"],
                pid=r["pid"],
                queues=tuple(json_list(r["queues"])) if r["queues"] is not None else None,
                concurrency=r["concurrency"],
                duties=tuple(json_list(r["duties"])),
                version=r["version"],
                started_at=t(r["started_at"]),
                last_seen_at=t(r["last_seen_at"]),
                stopped_at=t(r["stopped_at"]) if r["stopped_at"] is not None else None,
                holding=tuple(sorted(int(i) for i in json_list(r["holding"]))),
                tasks=tuple(json_list(r["tasks"])) if r["tasks"] is not None else None,
                clock_offset=(
                    float(r["clock_offset_seconds"])
                    if r["clock_offset_seconds"] is not None
                    else None
                ),
            )
            for r in rows
        ]

    def database_now(self) -> datetime:
        """One statement alone (autocommit where the dialect has it: the fewer round trips,
        the tighter a node's reading of the database's clock); SQLite reads it in a read-only
        transaction, so it takes no write lock."""
        local = self.driver.clock_is_local
        with self.driver.transaction(write=False) if local else self.driver.single() as c:
            row = c.one("database_now")
        assert row is not None  # the statement returns one row
        return self._t(row["now"])

    # -- API tokens -------------------------------------------------------------------------

    @conflicts_retried
    def create_token(
        self,
        *,
        tenant: str,
        role: Role,
        name: str,
        prefix: str,
        secret_hash: str,
        now: datetime,
        expires_at: datetime | None = None,
    ) -> ApiToken:
        with self.driver.transaction() as c:
            c.run(
                "insert_token",
                tenant=tenant,
                role=str(role),
                name=name,
                prefix=prefix,
                secret_hash=secret_hash,
                now=now,
                expires_at=expires_at,
            )
            row = c.one("token_by_hash_read", secret_hash=secret_hash)
        assert row is not None  # inserted in this transaction
        return token_from_row(row, self._t)

    def list_tokens(self, tenant: str | None) -> list[ApiToken]:
        with self.driver.transaction(write=False) as c:
            rows = c.rows("list_tokens", tenant=tenant)
        return [token_from_row(r, self._t) for r in rows]

    @conflicts_retried
    def revoke_token(self, token_id: int, now: datetime) -> ApiToken | None:
        with self.driver.transaction() as c:
            c.run("revoke_token", id=token_id, now=now)
            row = c.one("select_token", id=token_id)
        return token_from_row(row, self._t) if row is not None else None

    @conflicts_retried
    def find_token(self, secret_hash: str, now: datetime) -> ApiToken | None:
        with self.driver.transaction(write=False) as c:  # most requests only read
            row = c.one("token_by_hash_read", secret_hash=secret_hash)
        if row is None:
            return None
        return self._used(token_from_row(row, self._t), row["secret_hash"], now)

    def _used(self, token: ApiToken, secret_hash: str, now: datetime) -> ApiToken:
        """Notes a token's use, to the minute: a busy token rarely writes."""
        if token.last_used_at is None or now - token.last_used_at >= timedelta(minutes=1):
            with self.driver.transaction() as c:
                c.run(
                    "token_used",
                    secret_hash=secret_hash,
                    now=now,
                    before=now - timedelta(minutes=1),
                )
            token = replace(token, last_used_at=now)
        return token

    @conflicts_retried
    def create_session(
        self, *, secret_hash: str, token_id: int, now: datetime, expires_at: datetime
    ) -> None:
        with self.driver.transaction() as c:
            c.run("delete_expired_sessions", now=now)
            c.run(
                "insert_session",
                secret_hash=secret_hash,
                token_id=token_id,
                now=now,
                expires_at=expires_at,
            )

    @conflicts_retried
    def find_session(self, secret_hash: str, now: datetime) -> ApiToken | None:
        with self.driver.transaction(write=False) as c:
            row = c.one("session_token", secret_hash=secret_hash, now=now)
        if row is None:
            return None
        return self._used(token_from_row(row, self._t), row["secret_hash"], now)

    @conflicts_retried
    def end_session(self, secret_hash: str) -> None:
        with self.driver.transaction() as c:
            c.run("delete_session", secret_hash=secret_hash)

    # -- figures ----------------------------------------------------------------------------

    def job_counts(self, tenant: str | None) -> list[JobCount]:
        with self.driver.transaction(snapshot=True) as c:
            rows = c.rows("job_counts", tenant=tenant)
        return [JobCount(r["status"], r["queue"], int(r["n"])) for r in rows]

    def oldest_overdue(self, tenant: str | None, now: datetime) -> datetime | None:
        with self.driver.transaction(snapshot=True) as c:
            row = c.one("oldest_overdue", tenant=tenant, now=now)
        if row is None or row["due_at"] is None:
            return None
        return self._t(row["due_at"])

    def attempt_samples(
        self, tenant: str | None, since: datetime, limit: int
    ) -> list[AttemptSample]:
        with self.driver.transaction(snapshot=True) as c:
            rows = c.rows("attempt_samples", tenant=tenant, since=since, limit=limit)
        return [sample_from_row(r, self._t) for r in rows]

"""An in-process API server for tests: a TestClient over create_app, and tokens by role."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient

from duetime import App
from duetime.admin.tokens import create_token
from duetime.server import ServerSettings, create_app
from duetime.store import open_store


@dataclass
class Api:
    app: App
    client: TestClient
    secrets: dict[tuple[str, str], str] = field(default_factory=dict)

    def token(self, tenant: str = "acme", role: str = "write") -> str:
        key = (tenant, role)
        if key not in self.secrets:
            self.secrets[key] = create_token(self.app, tenant, role)[1]
        return self.secrets[key]

    def headers(self, tenant: str = "acme", role: str = "write", **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(tenant, role)}", **extra}

    def call(
        self, method: str, path: str, *, tenant: str = "acme", role: str = "write", **kw: Any
    ) -> Any:
        headers = {**self.headers(tenant, role), **kw.pop("headers", {})}
        return self.client.request(method, path, headers=headers, **kw)

    def count_jobs(self) -> int:
        return sum(c.count for c in self.app.store.job_counts(None))


@contextmanager
def running_api(url: str, **settings: Any) -> Iterator[Api]:
    store = open_store(url)
    try:
        store.migrate()
    finally:
        store.close()
    app = App(url, max_payload_bytes=settings.pop("max_payload_bytes", 1024 * 1024))
    server = create_app(app, ServerSettings(**settings))
    with TestClient(server, raise_server_exceptions=False) as client:
        yield Api(app, client)
    app.close()

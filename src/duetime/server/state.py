"""What every route reads from the running server: its settings and the App it serves."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from duetime.client import App


@dataclass(frozen=True)
class ServerSettings:
    auth: bool = True  # False only on a loopback host (see `duetime serve --no-auth`)
    tenant: str = "default"  # the tenant of every request when auth is off
    max_body_bytes: int = 2 * 1024 * 1024  # request bodies above this get 413
    secure_cookies: bool = False  # mark the session cookie Secure (serve behind HTTPS)
    refresh_seconds: int = 5  # how often dashboard figures refresh


@dataclass
class ServerState:
    app: App
    settings: ServerSettings


def server_state(request: Request) -> ServerState:
    """The state create_app attached to the FastAPI app serving `request`."""
    state: ServerState = request.app.state.duetime
    return state


def duetime_app(request: Request) -> App:
    return server_state(request).app

"""What every route needs from the running server: its App, and the tenant a caller may use."""

from __future__ import annotations

from fastapi import HTTPException, Request

from duetime.client import App
from duetime.server.auth import Principal


def duetime_app(request: Request) -> App:
    app: App = request.app.state.duetime.app
    return app


def scope_tenant(who: Principal, tenant: str | None) -> str | None:
    """The tenant a listing covers: the caller's own, or for admins every tenant or the one
    they name with ?tenant=."""
    if tenant is None:
        return who.tenant_filter
    if who.sees_all or tenant == who.tenant:
        return tenant
    raise HTTPException(403, "only admin tokens may choose a tenant; leave tenant out")


def act_as(request: Request, who: Principal, tenant: str | None) -> App:
    """The App view a request acts through: the caller's tenant, or (admins) the named one."""
    chosen = scope_tenant(who, tenant) or who.tenant
    return duetime_app(request).scoped(chosen)

"""App's tenants: their flow settings and figures (docs/flow-control.md)."""

from __future__ import annotations

from duetime.admin import flow
from duetime.client.part import AppPart
from duetime.core.flow.parsers import KEEP, Keep
from duetime.core.flow.records import TenantFlow, TenantSettings
from duetime.twins import async_twin


class Tenants(AppPart):
    """Tenants' flow settings (concurrency, max backlog, weight) and figures."""

    def tenants(self) -> list[TenantSettings]:
        """Every tenant with settings, by name (a tenant not listed has the defaults)."""
        return self.store.tenant_settings()

    def tenant_settings(self, name: str) -> TenantSettings:
        """A tenant's flow settings (the defaults for a tenant never set)."""
        found = [t for t in self.store.tenant_settings() if t.tenant == name]
        return found[0] if found else TenantSettings(name)

    def tenant_flows(self) -> list[TenantFlow]:
        """Every tenant with settings or waiting/running jobs: settings, backlog, running."""
        return flow.tenant_flows(self, None)

    def set_tenant(
        self,
        name: str,
        *,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> TenantSettings:
        """Change a tenant's limits, cluster-wide: concurrency (its attempts running at once,
        over every queue), max_backlog (its waiting jobs), weight (its share of a claim
        against other tenants). Settings not given are kept; None removes a limit."""
        return flow.set_tenant_flow(
            self, name, concurrency=concurrency, max_backlog=max_backlog, weight=weight
        )

    aset_tenant = async_twin(set_tenant)

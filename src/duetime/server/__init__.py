"""duetime's HTTP server: the REST API (/v1), the dashboard (/), /metrics and health checks."""

from duetime.server.app import ServerSettings, create_app

__all__ = ["ServerSettings", "create_app"]

"""duetime's HTTP server: the REST API (/v1), the dashboard (/), /metrics and health checks."""

from duetime.server.app import create_app
from duetime.server.state import ServerSettings

__all__ = ["ServerSettings", "create_app"]

"""Operator actions shared by the API, the CLI and the dashboard, one concern per module:
tokens, dashboard sessions, stats, bulk replay, the flow of queues and tenants.

They act on anything with a store and a clock (a `Backend`, such as duetime.App), so this
package sits below the App facade and never imports it. Its names are gathered here, so that
`from duetime import admin` then `admin.create_token(...)` reads as the old operators module did.
"""

from duetime.admin.backend import Backend
from duetime.admin.figures import SAMPLE_LIMIT, stats
from duetime.admin.flow import (
    Counts,
    queue_flows,
    set_queue_flow,
    set_tenant_flow,
    tenant_flows,
)
from duetime.admin.replay import MAX_BULK, ReplayReport, dead_job_ids, replay_many
from duetime.admin.sessions import SESSION_LIFETIME, check_session, end_session, start_session
from duetime.admin.tokens import Verdict, authenticate, check_token, create_token, revoke_token

__all__ = [
    "MAX_BULK",
    "SAMPLE_LIMIT",
    "SESSION_LIFETIME",
    "Backend",
    "Counts",
    "ReplayReport",
    "Verdict",
    "authenticate",
    "check_session",
    "check_token",
    "create_token",
    "dead_job_ids",
    "end_session",
    "queue_flows",
    "replay_many",
    "revoke_token",
    "set_queue_flow",
    "set_tenant_flow",
    "start_session",
    "stats",
    "tenant_flows",
]

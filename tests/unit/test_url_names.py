"""Names URLs carry as one path segment (queues, tenants, schedules) may hold '/', which the
API and dashboard escape, but not be '.' or '..', which no URL can carry (issue 20, section 3)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from duetime.core.errors import InvalidRequest
from duetime.core.requests import TaskDefaults, build_new_job
from duetime.core.schedule_spec import build_spec

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize("name", [".", ".."])
def test_a_dot_name_is_refused_for_a_queue_a_tenant_and_a_schedule(name: str) -> None:
    with pytest.raises(InvalidRequest, match=r"queue '\.+' is refused: '\.' and '\.\.' cannot"):
        build_new_job("t", {}, now=NOW, tenant="acme", defaults=TaskDefaults(), queue=name)
    with pytest.raises(InvalidRequest, match=r"tenant '\.+' is refused"):
        build_new_job("t", {}, now=NOW, tenant=name, defaults=TaskDefaults())
    with pytest.raises(InvalidRequest, match=r"schedule name '\.+' is refused"):
        build_spec(name, "t", timezone="UTC", cron="@daily")


@pytest.mark.parametrize("name", ["a/b", "../tenants/acme", "x/../shared", "...", ".a"])
def test_names_with_slashes_and_dots_inside_are_kept(name: str) -> None:
    job = build_new_job("t", {}, now=NOW, tenant=name, defaults=TaskDefaults(), queue=name)
    assert (job.queue, job.tenant) == (name, name)
    assert build_spec(name, "t", timezone="UTC", cron="@daily").name == name

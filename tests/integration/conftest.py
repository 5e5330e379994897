"""Fixtures of the integration suite: a migrated database of each dialect, and processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime import App
from integration.apps.itapp import make_app
from integration.procs import Processes, migrate
from kit import DialectKit, kit_named

# The integration suite runs on these dialects; a test module that must hold on every
# registered dialect overrides `kit` with params=conftest.STORE_KINDS (test_drain, test_stale).
EVERYDAY = ["sqlite", "postgres"]


@pytest.fixture(params=EVERYDAY)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    return kit_named(request.param)


@pytest.fixture
def db_url(store_url: str) -> str:
    """The `store_url` database (SQLite and PostgreSQL), migrated and empty."""
    migrate(store_url)
    return store_url


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    """Starts worker processes; any still running when the test ends is killed."""
    processes = Processes(tmp_path)
    yield processes
    processes.finish()


@pytest.fixture
def app(db_url: str) -> Iterator[App]:
    """The integration app (tasks of apps/itapp.py) on `db_url`, closed after the test."""
    instance = make_app(db_url)
    yield instance
    instance.close()


# Tests that talk to RabbitMQ share one broker (and its queues), and the outbox chaos run stops
# and restarts it: on several test processes (make test: -n 2 --dist loadgroup) they all run in
# one process, one after another.
BROKER_MODULES = {"test_outbox.py", "test_outbox_cli.py", "test_outbox_flow_procs.py"}
BROKER_TESTS = {"test_short_outbox_chaos_run_passes_the_history_checker"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)  # without its parameters
        if item.path.name in BROKER_MODULES or name in BROKER_TESTS:
            item.add_marker(pytest.mark.xdist_group("broker"))

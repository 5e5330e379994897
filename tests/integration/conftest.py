"""Fixtures of the integration suite: a migrated database of each dialect, and processes."""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime import App
from groups import BROKER_GROUP, uses_the_broker
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


# Tests that talk to RabbitMQ must never overlap (tests/groups.py): not on two test processes of
# one run, nor in two runs on one machine. Each holds a lock file for the machine while it runs;
# under --dist loadgroup they are also one work unit, run in turn on one process (the scheduler
# in tests/groups.py), so that no process of a run waits on the lock.
BROKER_LOCK = Path(tempfile.gettempdir()) / "duetime-tests-rabbitmq.lock"


def _uses_the_broker(item: pytest.Item) -> bool:
    name = getattr(item, "originalname", item.name)  # without its parameters
    return uses_the_broker(item.path.name, name)


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups to schedule them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _uses_the_broker(item):
            item.add_marker(pytest.mark.xdist_group(BROKER_GROUP))


@pytest.fixture(autouse=True)
def _broker_to_itself(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that uses RabbitMQ holds the machine's broker lock while it runs."""
    if not _uses_the_broker(request.node):
        yield
        return
    with open(BROKER_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

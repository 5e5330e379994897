"""Fixtures of the integration suite: a migrated database of each dialect, and processes."""

from __future__ import annotations

import fcntl
import tempfile
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
# and restarts it, so they must never overlap: not on two test processes of one run (make test:
# -n 2), nor in two runs on one machine (they share its RabbitMQ). Each holds a lock file for
# the machine while it runs. They are also put in one xdist group (--dist loadgroup) so that
# one process runs them in turn instead of the other waiting on the lock; but xdist 3.8 groups
# nothing under pytest 9.2 (it renames the items' node ids through an attribute that pytest
# 9.2 no longer reads), so the lock is what keeps them apart.
BROKER_MODULES = {"test_outbox.py", "test_outbox_cli.py", "test_outbox_flow_procs.py"}
BROKER_TESTS = {
    "test_short_outbox_chaos_run_passes_the_history_checker",
    "test_a_relay_cut_off_loses_nothing_and_resumes",
}
BROKER_LOCK = Path(tempfile.gettempdir()) / "duetime-tests-rabbitmq.lock"


def _uses_the_broker(item: pytest.Item) -> bool:
    name = getattr(item, "originalname", item.name)  # without its parameters
    return item.path.name in BROKER_MODULES or name in BROKER_TESTS


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups to schedule them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _uses_the_broker(item):
            item.add_marker(pytest.mark.xdist_group("broker"))


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

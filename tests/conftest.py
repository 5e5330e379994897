"""Fixtures shared by every suite: a manual clock and a store of each dialect (tests/kit.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from duetime.core.clock import ManualClock
from duetime.store.base import Store
from kit import KITS, DialectKit, kit_named

STORE_KINDS = [kit.name for kit in KITS]

# tests/django_backend runs in venvs of its own, with Django (make test-django, which make test
# runs, with --confcutdir so that this file is not read there): a run of all of tests/ in
# duetime's venv leaves it out
collect_ignore = ["django_backend"]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(autouse=True)
def _wakeups_notice_a_stop_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker in the test process notices its stop within 50 ms instead of WAIT (0.5 s):
    its wake-ups thread blocks on the feed (LISTEN/NOTIFY, SQLite's data_version) at most
    that long before it looks again, and every test that stops a worker waited for it (about
    half a second per test, a minute of the unit and contract run). What a wake-up brings is
    unchanged; worker processes the tests start keep the real WAIT."""
    from duetime.runtime import wakeups

    monkeypatch.setattr(wakeups, "WAIT", 0.05)


@pytest.fixture(scope="session", autouse=True)
def _kits_finish() -> Iterator[None]:
    """Each kit drops the databases this run created, when the run ends."""
    yield
    for kit in KITS:
        kit.finish()


@pytest.fixture(scope="session")
def pg_database_url() -> str:
    """This run's PostgreSQL database (a private server is started if needed)."""
    from kit import PostgresKit

    kit = kit_named("postgres")
    assert isinstance(kit, PostgresKit)
    return kit.run_url()


def reset_postgres(url: str) -> None:
    """Drop every duetime table so the next migrate() builds a clean schema (tests may break it),
    not merely empty a schema kept from an earlier test as store_url does."""
    kit_named("postgres").fresh_url(Path("."), drop=True)


@pytest.fixture(params=STORE_KINDS)
def kit(request: pytest.FixtureRequest) -> DialectKit:
    """The dialect kit of each registered dialect."""
    return kit_named(request.param)


@pytest.fixture
def store_url(kit: DialectKit, tmp_path: Path) -> str:
    """A database URL of each dialect with nothing in it: not migrated, or (PostgreSQL,
    MariaDB/MySQL: a schema the previous test left intact is kept) migrated with every table
    empty. A test that needs a database never migrated takes kit.fresh_url(tmp_path,
    drop=True)."""
    return kit.fresh_url(tmp_path)


@pytest.fixture
def make_store(store_url: str) -> Iterator[Callable[[], Store]]:
    """Opens more stores (connections) on the same database; all are closed after the test."""
    from duetime.store import open_store

    opened: list[Store] = []

    def make() -> Store:
        s = open_store(store_url)
        opened.append(s)
        return s

    first = make()
    first.migrate()
    yield make
    for s in opened:
        s.close()


@pytest.fixture
def store(make_store: Callable[[], Store]) -> Store:
    return make_store()


def pytest_configure(config: pytest.Config) -> None:
    """Once per run (not in each xdist process): compile duetime's modules and the test apps to
    bytecode, so that the hundreds of `duetime` processes the tests start read it rather than
    compile every module again each (about a third of a CLI call's import time), which they do
    when PYTHONDONTWRITEBYTECODE is set or the source changed since it was last compiled."""
    if hasattr(config, "workerinput"):
        return
    import compileall

    import duetime

    for folder in (Path(duetime.__file__).parent, Path(__file__).parent / "integration" / "apps"):
        compileall.compile_dir(folder, quiet=2)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """--dist loadgroup keeps the RabbitMQ tests on one process, one after another
    (tests/groups.py); other modes are xdist's own."""
    if config.getoption("dist", None) != "loadgroup":
        return None
    from groups import make_scheduler

    return make_scheduler(config, log)

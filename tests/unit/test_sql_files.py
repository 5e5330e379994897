"""Every dialect defines exactly the named statements of store/statements.py, and the same
migration versions."""

from __future__ import annotations

import pytest

from duetime.store import DIALECTS
from duetime.store.driver import load_migrations, load_queries
from duetime.store.statements import STATEMENTS

PACKAGES = sorted({module.rsplit(".", 1)[0] for module, _ in DIALECTS.values()})


@pytest.mark.parametrize("package", PACKAGES)
def test_each_dialect_defines_every_statement_of_the_contract(package: str) -> None:
    defined = set(load_queries(package))
    assert sorted(set(STATEMENTS) - defined) == [], "missing"
    assert sorted(defined - set(STATEMENTS)) == [], "not in store/statements.py"


@pytest.mark.parametrize("package", PACKAGES)
def test_each_dialect_numbers_its_migrations_from_one(package: str) -> None:
    versions = [m.version for m in load_migrations(package)]
    assert versions == list(range(1, max(versions) + 1))

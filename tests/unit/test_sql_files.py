"""Every dialect defines exactly the named statements of store/statements.py, and the same
migration versions."""

from __future__ import annotations

import pytest

from duetime.store import DIALECTS
from duetime.store.driver import load_migrations, load_queries
from duetime.store.statements import STATEMENTS

# 0006 comes from a branch merged before this one (issue 13); until it lands it is the one gap
# allowed. Once every dialect has 0006 this set changes nothing and can go.
PENDING = {6}

PACKAGES = sorted({module.rsplit(".", 1)[0] for module, _ in DIALECTS.values()})


@pytest.mark.parametrize("package", PACKAGES)
def test_each_dialect_defines_every_statement_of_the_contract(package: str) -> None:
    defined = set(load_queries(package))
    assert sorted(set(STATEMENTS) - defined) == [], "missing"
    assert sorted(defined - set(STATEMENTS)) == [], "not in store/statements.py"


@pytest.mark.parametrize("package", PACKAGES)
def test_each_dialect_numbers_its_migrations_from_one(package: str) -> None:
    versions = [m.version for m in load_migrations(package)]
    expected = [v for v in range(1, max(versions) + 1) if v in versions or v not in PENDING]
    assert versions == expected

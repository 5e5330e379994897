"""Every dialect defines exactly the named statements of store/statements.py, and the same
migration versions."""

from __future__ import annotations

from pathlib import Path

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
    expected = list(range(1, max(versions) + 1))
    assert versions == expected


def a_dialect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sql: str) -> str:
    """A package holding only a queries.sql, importable by name."""
    name = f"fake_dialect_{tmp_path.name}"  # a name of its own: modules are imported once
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "queries.sql").write_text(sql)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_block_naming_another_runs_its_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = "-- name: claim\nSET x = 1;\nSELECT 1;\n\n-- name: claim_queues\n-- the same\n@claim\n"
    queries = load_queries(a_dialect(tmp_path, monkeypatch, sql))
    assert queries["claim_queues"] == queries["claim"] == ("SET x = 1", "SELECT 1")


def test_a_block_naming_one_not_defined_above_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = "-- name: claim_queues\n@claim\n\n-- name: claim\nSELECT 1;\n"
    with pytest.raises(ValueError, match="claim_queues names claim, not defined above"):
        load_queries(a_dialect(tmp_path, monkeypatch, sql))


def test_a_part_is_written_into_each_statement_that_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = (
        "-- part: classes\n-- the classes\nWITH c AS (\n    SELECT 1 AS p\n)\n\n"
        "-- name: a\nSET x = 1;\n@classes\nSELECT p FROM c;\n\n"
        "-- name: b\n@classes\nSELECT p + 1 FROM c;\n"
    )
    queries = load_queries(a_dialect(tmp_path, monkeypatch, sql))
    assert queries == {
        "a": ("SET x = 1", "WITH c AS (\n    SELECT 1 AS p\n)\nSELECT p FROM c"),
        "b": ("WITH c AS (\n    SELECT 1 AS p\n)\nSELECT p + 1 FROM c",),
    }  # a part is no statement of its own


def test_a_part_may_use_a_part_defined_above_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(postgres/queries.sql: finish_moves uses job_columns.)"""
    sql = (
        "-- part: cols\n    a, b\n\n"
        "-- part: moves\nWITH m AS (\n    SELECT\n@cols\n    FROM t\n)\n\n"
        "-- name: x\n@moves\nSELECT count(*) FROM m;\n"
    )
    queries = load_queries(a_dialect(tmp_path, monkeypatch, sql))
    moves = "WITH m AS (\n    SELECT\na, b\n    FROM t\n)"
    assert queries == {"x": (moves + "\nSELECT count(*) FROM m",)}


def test_a_statement_naming_a_part_not_defined_above_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = "-- name: a\n@classes\nSELECT 1;\n\n-- part: classes\nWITH c AS (SELECT 1)\n"
    with pytest.raises(ValueError, match="a names the part classes, not defined above"):
        load_queries(a_dialect(tmp_path, monkeypatch, sql))

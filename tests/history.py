"""Jobs moved to the history table by hand (docs/history-plan.md): the tests of the reads that
go to both tables plant rows there before any statement of duetime moves one."""

from __future__ import annotations

from collections.abc import Sequence

from kit import DialectKit

# a generated column of the MariaDB/MySQL jobs tables (the claim order's key): not written
GENERATED = {"neg_priority"}
# the ids of the jobs held by both tables at once (none may be)
IN_BOTH = "SELECT j.id FROM duetime_jobs j JOIN duetime_jobs_done d ON d.id = j.id"


def columns(kit: DialectKit, url: str, table: str) -> list[str]:
    """A table's columns in their order."""
    if kit.name == "sqlite":
        return [row[1] for row in kit.execute(url, f"PRAGMA table_info({table})")]
    schema = "DATABASE()" if kit.name == "mysql" else "current_schema()"
    rows = kit.execute(
        url,
        "SELECT column_name FROM information_schema.columns "
        f"WHERE table_schema = {schema} AND table_name = ? ORDER BY ordinal_position",
        (table,),
    )
    return [str(name) for (name,) in rows]


def copy(kit: DialectKit, url: str, job_id: int, new_id: int | None = None) -> None:
    """A copy of a job's row (from whichever table holds it) in the history table (under
    `new_id`, if given)."""
    names = [c for c in columns(kit, url, "duetime_jobs") if c not in GENERATED]
    picked = ", ".join("?" if c == "id" and new_id is not None else c for c in names)
    params = (job_id,) if new_id is None else (new_id, job_id)
    source = table_of(kit, url, job_id)
    kit.execute(
        url,
        f"INSERT INTO duetime_jobs_done ({', '.join(names)}) "
        f"SELECT {picked} FROM {source} WHERE id = ?",
        params,
    )


def move(kit: DialectKit, url: str, job_ids: Sequence[int]) -> None:
    """Move jobs that ended from the jobs table to the history table, as archive_ended does
    (a job already there stays)."""
    for job_id in job_ids:
        place(kit, url, job_id, "duetime_jobs_done")


def table_of(kit: DialectKit, url: str, job_id: int) -> str | None:
    """The table that holds the job: duetime_jobs or duetime_jobs_done (None: neither)."""
    found = [
        table
        for table in ("duetime_jobs", "duetime_jobs_done")
        if kit.execute(url, f"SELECT id FROM {table} WHERE id = ?", (job_id,))
    ]
    assert len(found) <= 1, f"job {job_id} is in both tables"
    return found[0] if found else None


def place(kit: DialectKit, url: str, job_id: int, table: str) -> None:
    """Put the job's row in `table` (duetime_jobs or duetime_jobs_done), moving it by hand
    from the other if it is there."""
    other = "duetime_jobs_done" if table == "duetime_jobs" else "duetime_jobs"
    if table_of(kit, url, job_id) != other:
        return
    names = ", ".join(c for c in columns(kit, url, "duetime_jobs") if c not in GENERATED)
    kit.execute(
        url, f"INSERT INTO {table} ({names}) SELECT {names} FROM {other} WHERE id = ?", (job_id,)
    )
    kit.execute(url, f"DELETE FROM {other} WHERE id = ?", (job_id,))

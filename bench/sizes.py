"""Bytes on disk of duetime's job tables (jobs, attempts), per table, TOAST and index.

Used by the `bytes` workload (bench/workloads.py) and by the size test
(tests/integration/test_sizes.py). Each function takes an open DB-API connection of its
dialect (autocommit) and returns {relation: bytes}, keys "<table>" (the heap or clustered
data: its main fork with the free space and visibility maps), "<table>.toast" (TOAST and its
index; PostgreSQL only), "<table>.<index>" (each secondary index; on MariaDB/MySQL the
primary key is the clustered data, on SQLite a rowid table's too).

PostgreSQL: after a plain `VACUUM` (no FULL: what autovacuum leaves). MariaDB/MySQL: each
table's tablespace file as it is (no ANALYZE, no OPTIMIZE), split per index by
mysql.innodb_index_stats. SQLite: the
dbstat table's pages when the library has it (and the file's free pages, "freelist"), else the
file's page_count * page_size.
"""

from __future__ import annotations

from typing import Any

# the jobs table, the history table a job that ended moves to (docs/history-plan.md), the
# attempts
TABLES = ("duetime_jobs", "duetime_jobs_done", "duetime_attempts")


def postgres_vacuum(conn: Any) -> None:
    """A plain VACUUM of the tables (autocommit connection)."""
    for table in TABLES:
        conn.execute(f"VACUUM {table}")


def postgres_sizes(conn: Any) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for table in TABLES:
        row = conn.execute(
            "SELECT pg_relation_size(c.oid, 'main') + pg_relation_size(c.oid, 'fsm') "
            "+ pg_relation_size(c.oid, 'vm'), "
            "COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0) "
            "FROM pg_class c WHERE c.oid = to_regclass(%s)",
            (table,),
        ).fetchone()
        if row is None:
            continue
        sizes[table] = int(row[0])
        sizes[f"{table}.toast"] = int(row[1])
        for name, size in conn.execute(
            "SELECT i.relname, pg_relation_size(i.oid) FROM pg_index x "
            "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = to_regclass(%s) "
            "ORDER BY i.relname",
            (table,),
        ).fetchall():
            sizes[f"{table}.{name}"] = int(size)
    return sizes


def postgres_updates(conn: Any) -> dict[str, int]:
    """pg_stat_user_tables' counters of the tables: inserts, updates, HOT updates, dead."""
    out: dict[str, int] = {}
    for name, ins, upd, hot, dead in conn.execute(
        "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup "
        "FROM pg_stat_user_tables WHERE relname = ANY (%s)",
        (list(TABLES),),
    ).fetchall():
        out[f"{name}.ins"] = int(ins)
        out[f"{name}.upd"] = int(upd)
        out[f"{name}.hot_upd"] = int(hot)
        out[f"{name}.dead"] = int(dead)
    return out


def mysql_sizes(conn: Any) -> dict[str, int]:
    """Each table's tablespace file (innodb_file_per_table: its rows with the primary key, and
    every secondary index), split per index by mysql.innodb_index_stats' page counts (an
    estimate the server refreshes in the background; the table's key gets the rest, so the
    total is the file's exact size)."""
    sizes: dict[str, int] = {}
    with conn.cursor() as cur:
        cur.execute("SELECT @@innodb_page_size")
        page = int(cur.fetchone()[0])
        for table in TABLES:
            cur.execute(
                "SELECT FILE_SIZE FROM information_schema.INNODB_SYS_TABLESPACES "
                "WHERE NAME = CONCAT(DATABASE(), '/', %s)",
                (table,),
            )
            row = cur.fetchone()
            if row is None:  # MySQL 8 names it INNODB_TABLESPACES: the server's figures
                cur.execute(
                    "SELECT data_length + index_length FROM information_schema.TABLES "
                    "WHERE table_schema = DATABASE() AND table_name = %s",
                    (table,),
                )
                row = cur.fetchone()
            if row is None:
                continue
            file_size = int(row[0])
            cur.execute(
                "SELECT index_name, stat_value FROM mysql.innodb_index_stats "
                "WHERE database_name = DATABASE() AND table_name = %s AND stat_name = 'size' "
                "AND index_name <> 'PRIMARY' ORDER BY index_name",
                (table,),
            )
            split = {f"{table}.{name}": int(value) * page for name, value in cur.fetchall()}
            sizes.update(split)
            sizes[table] = file_size - sum(split.values())
    return sizes


def sqlite_sizes(conn: Any) -> dict[str, int]:
    try:
        rows = conn.execute(
            "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY name"
        ).fetchall()
    except Exception:  # no dbstat in this SQLite: the file as a whole
        count = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return {"file": int(count) * int(size)}
    owners = dict(
        conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')")
    )
    sizes: dict[str, int] = {}
    for name, size in rows:
        table = owners.get(name)
        if table not in TABLES:
            continue
        key = table if name == table else f"{table}.{name}"
        sizes[key] = int(size)
    # pages the drain freed (the file keeps them for reuse): counted, as PostgreSQL's free space
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    sizes["freelist"] = int(free) * int(conn.execute("PRAGMA page_size").fetchone()[0])
    return sizes


def total(sizes: dict[str, int]) -> int:
    return sum(sizes.values())

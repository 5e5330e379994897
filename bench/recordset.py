"""What PostgreSQL spends reading a batch of records from JSON, jsonb_to_recordset against
json_to_recordset (docs/performance.md, "Batches read as json"): a batch like a finish of
successes (100 records of the finish's 12 fields), read N times by one prepared statement
each way, alternating (the first of each round alternating too); prints the server's CPU
(its backend's, /proc/<pid>/stat: a PostgreSQL on this machine) and the wall time per record.

    .venv/bin/python -m bench.recordset --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import psycopg

from bench.dbs import DEFAULT_PG_URL

COLUMNS = (
    "job_id bigint, generation bigint, claim_token bigint, from_status text, to_status text, "
    "due_at timestamptz, only_if_expired boolean, status text, error_category text, "
    "error_message text, error_traceback text, kept boolean"
)


def backend_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", default=DEFAULT_PG_URL)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reads", type=int, default=2000, help="reads of the batch per measurement")
    p.add_argument("--records", type=int, default=100, help="records per batch")
    args = p.parse_args()

    rng = random.Random(1)
    batch = json.dumps(
        [
            {
                "job_id": i,
                "generation": 1,
                "claim_token": rng.getrandbits(62),
                "from_status": "running",
                "to_status": "succeeded",
                "due_at": None,
                "only_if_expired": False,
                "status": "succeeded",
                "error_category": None,
                "error_message": None,
                "error_traceback": None,
                "kept": True,
            }
            for i in range(args.records)
        ]
    )
    # both functions convert every column the record type declares, whichever are read
    queries = {
        kind: f"SELECT sum(v.job_id + v.claim_token %% 7)::bigint, count(v.kept), "  # noqa: S608
        f"count(v.status), count(v.to_status) "
        f"FROM {kind}_to_recordset(%s::{kind}) AS v({COLUMNS})"
        for kind in ("jsonb", "json")
    }
    with psycopg.connect(args.url, autocommit=True) as conn:
        pid = conn.info.backend_pid
        for round_ in range(args.rounds):
            order = list(queries.items())
            for kind, sql in order if round_ % 2 == 0 else order[::-1]:
                for _ in range(50):  # prepared, warm
                    conn.execute(sql, (batch,), prepare=True)
                cpu, wall = backend_cpu(pid), time.perf_counter()
                for _ in range(args.reads):
                    conn.execute(sql, (batch,), prepare=True)
                wall = time.perf_counter() - wall
                cpu = backend_cpu(pid) - cpu
                per = args.reads * args.records
                line = {
                    "kind": f"{kind}_to_recordset",
                    "server_cpu_us_per_record": round(cpu / per * 1e6, 2),
                    "wall_us_per_record": round(wall / per * 1e6, 2),
                }
                print(json.dumps(line), flush=True)  # noqa: T201 - the script's output


if __name__ == "__main__":
    main()

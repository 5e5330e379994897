"""The app of the sequences integration test (test_sequences_procs.py): ledger postings in
per-account sequences. Workers load it with `--app seqapp:app`; each attempt appends
"<job_id> <attempt> <start> <end>" (time.time(), inside the handler) to a file per process in
the folder named by DUETIME_IT_OUT. A posting with fail_first fails its first attempt."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import duetime
from duetime import App

_lock = threading.Lock()


def make_app(database_url: str | None = None) -> App:
    app = App(database_url)

    @app.task(
        name="ledger.post",
        sequence="{account}",
        max_attempts=3,
        retry=duetime.RetryPolicy(base=0.05, cap=0.1),
    )
    def post(account: str, n: int, fail_first: bool = False) -> None:
        start = time.time()
        attempt = duetime.current().attempt
        time.sleep(0.02)  # long enough for a second start beside it to show
        end = time.time()
        folder = Path(os.environ["DUETIME_IT_OUT"])
        with _lock, open(folder / f"spans-{os.getpid()}.txt", "a") as f:
            f.write(f"{duetime.current().job_id} {attempt} {start} {end}\n")
        if fail_first and attempt == 1:
            raise RuntimeError(f"posting {n} of {account} failed (its first attempt)")

    return app


app = make_app()

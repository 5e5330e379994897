"""The short chaos run: real workers on a private PostgreSQL, under SIGKILL, SIGSTOP and server
restarts, judged by the history checker (docs/chaos.md). About a minute on two cores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from duetime.chaos.run import _find_bin_dir


def _have_postgres() -> bool:
    try:
        _find_bin_dir()
    except RuntimeError:
        return False
    return True


@pytest.mark.timeout(240)
@pytest.mark.skipif(not _have_postgres(), reason="needs initdb/pg_ctl (install postgresql)")
def test_short_chaos_run_passes_the_history_checker(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "duetime.chaos.run",
            "--jobs",
            "1500",
            "--duration",
            "40",
            "--workers",
            "3",
            "--seed",
            "20261129",
            "--drain-timeout",
            "60",
            "--report",
            str(report_path),
        ],
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    output = f"stdout:\n{done.stdout[-6000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert report_path.exists(), f"the chaos run wrote no report (exit {done.returncode})\n{output}"
    report = json.loads(report_path.read_text())
    check = report["check"]
    assert done.returncode == 0 and report["ok"], f"violations: {check['violations']}\n{output}"

    driver = report["driver"]
    counts = check["counts"]
    assert driver["enqueued"] == 1500
    assert driver["pg_restarts"] >= 1
    assert driver["sigkills"] >= 3
    assert driver["sigstops"] >= 1
    assert driver["not_terminal_after_drain"] == 0
    assert counts["lost_jobs"] == 0
    assert counts["stale_completions_accepted"] == 0
    assert counts["double_effects"] == 0
    assert counts["accepted_by_driver"] == 1500
    assert counts["lost_attempts"] >= 1, "the faults never cost an attempt: they did not bite"
    assert check["violation_totals"] == {}

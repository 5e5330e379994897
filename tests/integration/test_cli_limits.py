"""`duetime limits list|set|delete` as real subprocesses: output, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess

import pytest

from duetime import App
from integration.procs import DUETIME, base_env


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DUETIME), *args, "--database-url", url],
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_set_list_delete(db_url: str) -> None:
    done = cli(
        db_url,
        "limits",
        "set",
        "payments-api",
        "--rate",
        "5/s",
        "--burst",
        "10",
        "--concurrency",
        "3",
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.splitlines()[0].split()
        == (
            "key rate burst concurrency running waiting tokens paused until retry budget breaker "
            "cool-down"
        ).split()
    )
    assert done.stdout.splitlines()[1].split() == (
        "payments-api 5/s 10 3 0 0 10.00 - - - -".split()
    )
    # a change keeps what it does not name; off switches a control off
    assert cli(db_url, "limits", "set", "payments-api", "--concurrency", "off").returncode == 0
    app = App(db_url)
    try:
        [found] = json.loads(cli(db_url, "limits", "list", "--json").stdout)
        assert (found["key"], found["rate"], found["burst"], found["concurrency"]) == (
            "payments-api",
            "5/s",
            10,
            None,
        )
        assert found["running"] == 0 and found["tokens"] == 10.0
        assert app.limit("payments-api").settings.burst == 10
    finally:
        app.close()
    done = cli(db_url, "limits", "delete", "payments-api")
    assert (done.returncode, done.stdout) == (0, "limit payments-api: deleted\n")
    assert json.loads(cli(db_url, "limits", "list", "--json").stdout) == []


def test_breaker_cooldown_set_shown_and_off(db_url: str) -> None:
    args = ("limits", "set", "api", "--breaker-threshold", "0.5", "--breaker-cooldown", "2m")
    done = cli(db_url, *args)
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header.split()[-2:] == ["breaker", "cool-down"]
    assert row.split()[-2:] == ["closed", "120s"]
    [found] = json.loads(cli(db_url, "limits", "list", "--json").stdout)
    assert (found["breaker_threshold"], found["breaker_cooldown_seconds"]) == (0.5, 120.0)
    done = cli(db_url, "limits", "set", "api", "--breaker-cooldown", "off")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].split()[-2:] == ["closed", "30s"]  # the default again
    app = App(db_url)
    try:
        settings = app.limit("api").settings
        assert (settings.breaker_threshold, settings.breaker_cooldown) == (0.5, None)
    finally:
        app.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "5/x"], "rate '5/x' is not valid; write N/s, N/m or N/h"),
        (["--concurrency", "0"], "concurrency must be a whole number from 1 to 1000000"),
        (["--retry-budget", "2"], "retry budget must be a fraction above 0 and at most 1"),
        (["--breaker-cooldown", "0.5s"], "breaker cool-down must be a duration from 1s to 1d"),
        (["--breaker-cooldown", "2d"], "breaker cool-down must be a duration from 1s to 1d"),
        (["--burst", "4"], "a burst needs a rate"),
        ([], "say what to set"),
    ],
)
def test_bad_values_exit_2_with_one_line(db_url: str, args: list[str], message: str) -> None:
    done = cli(db_url, "limits", "set", "api", *args)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert message in last, done.stderr
    assert done.stdout == ""


def test_bad_key_and_unknown_key(db_url: str) -> None:
    done = cli(db_url, "limits", "set", "bad key", "--concurrency", "2")
    assert done.returncode == 2 and "limit key 'bad key' is not valid" in done.stderr
    done = cli(db_url, "limits", "delete", "nope")
    assert done.returncode == 1
    assert (
        done.stderr == "duetime: error: no limit 'nope'; `duetime limits list` shows the limits\n"
    )


def test_stats_show_the_limits(db_url: str) -> None:
    plain = cli(db_url, "stats", "--json")
    assert plain.returncode == 0 and "limits" not in json.loads(plain.stdout)
    assert cli(db_url, "limits", "set", "api", "--rate", "2/m").returncode == 0
    [limit] = json.loads(cli(db_url, "stats", "--json").stdout)["limits"]
    assert (limit["key"], limit["rate"], limit["tokens"]) == ("api", "2/m", 1.0)
    text = cli(db_url, "stats").stdout.splitlines()
    assert text[-1].split() == "api 2/m 1 - 0 0 1.00 - - - -".split()

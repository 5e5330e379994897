"""The CLI's flags are a public contract: parse them without touching a database."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from duetime.cli import build_parser, main
from duetime.version import __version__


@pytest.mark.parametrize(
    "argv",
    [
        ["--database-url", "sqlite:///a.db", "--tenant", "acme", "jobs", "list"],
        ["jobs", "list", "--database-url", "sqlite:///a.db", "--tenant", "acme"],
        ["--database-url", "sqlite:///a.db", "jobs", "list", "--tenant", "acme"],
    ],
)
def test_common_options_work_before_and_after_the_command(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.database_url, args.tenant) == ("sqlite:///a.db", "acme")


def test_defaults_when_common_options_are_absent() -> None:
    args = build_parser().parse_args(["jobs", "list"])
    assert (args.database_url, args.tenant) == (None, "default")


def test_enqueue_flags() -> None:
    args = build_parser().parse_args(
        [
            "enqueue",
            "send",
            "--args",
            '{"a": 1}',
            "--in",
            "30s",
            "--key",
            "k",
            "--queue",
            "q",
            "--priority",
            "3",
            "--max-attempts",
            "4",
            "--deadline",
            "2030-01-01T00:00:00Z",
            "--json",
        ]
    )
    assert (args.task, args.delay, args.key, args.queue) == (
        "send",
        timedelta(seconds=30),
        "k",
        "q",
    )
    assert (args.priority, args.max_attempts, args.json) == (3, 4, True)


@pytest.mark.parametrize(
    "argv",
    [
        ["enqueue", "t", "--at", "2030-01-01T00:00:00Z", "--in", "5s"],
        ["worker"],
        ["worker", "--app", "m:app", "--concurrency", "0"],
        ["jobs", "reschedule", "1"],
        ["jobs", "show", "abc"],
        ["nonsense"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert "usage:" in capsys.readouterr().err


# -- every flag explains itself ----------------------------------------------------------------


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("duetime",)
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the command tree (the top one, each command, each action)."""
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_flag_and_argument_has_help() -> None:
    missing = [
        f"{command} {'/'.join(action.option_strings) or action.dest}"
        for command, parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction)
        and (not action.help or action.help == argparse.SUPPRESS)
    ]
    assert missing == [], "give these a help text"


def test_the_walk_sees_every_command() -> None:
    commands = {command for command, _ in _parsers(build_parser())}
    assert {"duetime jobs reschedule", "duetime schedules backfill", "duetime serve"} <= commands


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"duetime {__version__}\n"


# -- bad flag values are usage errors (exit 2), found before any database is opened -------------


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["enqueue", "t", "--at", "tomorrow"], "argument --at: value 'tomorrow' is not an ISO"),
        (["enqueue", "t", "--at", "2030-01-01T09:00:00"], "has no UTC offset"),
        (["enqueue", "t", "--in", "5 minutes"], "argument --in: value '5 minutes' is not a dur"),
        (["enqueue", "t", "--in=-5"], "must not be negative"),
        (["enqueue", "t", "--args", "{bad"], "argument --args: not valid JSON"),
        (["enqueue", "t", "--args", "[1, 2]"], "argument --args: must be a JSON object"),
        (["enqueue", "t", "--deadline", "friday"], "argument --deadline: value 'friday'"),
        (["enqueue", "t", "--priority", "abc"], "argument --priority"),
        (["jobs", "list", "--due-after", "2030-01-01T00:00:00"], "has no UTC offset"),
        (["jobs", "list", "--due-before", "soon"], "argument --due-before"),
        (["jobs", "reschedule", "1", "--at", "tomorrow"], "argument --at"),
        (["jobs", "reschedule", "1", "--in", "later"], "argument --in"),
        (["jobs", "reschedule", "1", "--at", "2030-01-01T00:00:00Z", "--in", "5m"], "not allowed"),
        (["schedules", "add", "s", "--task", "t", "--every", "often", "--tz", "UTC"], "--every"),
        (
            ["schedules", "add", "s", "--task", "t", "--tz", "UTC", "--start", "2030-01-01"],
            "--start",
        ),
        (["schedules", "update", "s", "--args", "{bad"], "argument --args: not valid JSON"),
        (["schedules", "update", "s", "--jitter", "a bit"], "argument --jitter"),
        (["schedules", "update", "s", "--catchup-window", "1 day"], "--catchup-window"),
        (["schedules", "update", "s", "--end", "never"], "argument --end"),
        (["schedules", "preview", "s", "--after", "now"], "argument --after"),
        (["schedules", "history", "s", "--limit", "0"], "argument --limit"),
        (
            ["schedules", "backfill", "s", "--from", "monday", "--to", "2030-01-01T00:00:00Z"],
            "--from",
        ),
        (["serve", "--port", "70000"], "argument --port: must be 0 to 65535"),
        (["serve", "--max-body-bytes", "0"], "argument --max-body-bytes"),
        (["worker", "--app", "m:app", "--metrics-port", "-1"], "argument --metrics-port"),
        (["worker", "--app", "m:app", "--loop", "tokio"], "argument --loop: invalid choice"),
        (["relay", "--loop", "trio"], "argument --loop: invalid choice"),
        (["jobs", "list", "--database-url", "typo.db"], "unsupported database URL 'typo.db'"),
        (["--database-url", "postgress://db/x", "stats"], "unsupported database URL 'postgress'"),
        (["enqueue", "t", "--args", " "], "argument --args: not valid JSON"),
    ],
)
def test_bad_flag_values_exit_2(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: duetime"), err
    assert fragment in err.splitlines()[-1], err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["enqueue", "t", "--priority", "5000"], "priority must be between -1000 and 1000"),
        (["enqueue", "t", "--max-attempts", "1001"], "max_attempts must be between 1 and 1000"),
        (
            ["enqueue", "t", "--at", "2030-01-02T00:00:00Z", "--deadline", "2030-01-01T00:00:00Z"],
            "is not after the due time",
        ),
        (["enqueue", "t", "--queue", "q" * 101], "the limit is 100"),
        (
            ["schedules", "add", "s", "--task", "t", "--cron", "0 * * * *", "--tz", "Mars/Base"],
            "Mars",
        ),
        (
            ["schedules", "add", "s", "--task", "t", "--every", "0.5s", "--tz", "UTC"],
            "once a second",
        ),
        (["schedules", "preview", "--every", "1m", "--tz", "UTC", "--count", "0"], "count"),
        # flag combinations the commands check themselves
        (["schedules", "preview", "s", "--cron", "@daily"], "a schedule name or an unsaved rule"),
        (["schedules", "preview"], "preview needs a schedule name, or --cron/--every"),
        (["schedules", "preview", "--cron", "@daily"], "needs --tz"),
        (["schedules", "update", "s"], "nothing to change"),
        (["enqueue", "--from-file", "jobs.jsonl", "--key", "k"], "--key applies to one job"),
    ],
)
def test_values_duetime_refuses_exit_2_and_create_nothing(
    argv: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Values that parse but that duetime refuses (a range, a deadline before the due time, an
    unknown zone) are bad flag values too, and flags that do not go together are usage errors:
    exit 2, and no database is opened."""
    database = tmp_path / "d.db"
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--database-url", f"sqlite:///{database}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: duetime"), err
    assert err.splitlines()[-1].startswith(f"duetime {argv[0]}"), err
    assert fragment in err.splitlines()[-1], err
    assert not database.exists()


def test_flag_values_arrive_parsed() -> None:
    args = build_parser().parse_args(
        ["enqueue", "t", "--at", "2030-03-01T09:00:00+01:00", "--args", '{"a": 1}']
    )
    assert args.at == datetime(2030, 3, 1, 8, tzinfo=UTC)
    assert args.args == {"a": 1}
    assert build_parser().parse_args(["enqueue", "t", "--args", ""]).args == {}, "as always"
    args = build_parser().parse_args(["jobs", "reschedule", "7", "--in", "1h30m"])
    assert (args.id, args.at, args.delay) == (7, None, timedelta(hours=1, minutes=30))


def test_worker_priority_share() -> None:
    args = build_parser().parse_args(["worker", "--app", "m:app", "--priority-share", "0.25"])
    assert args.priority_share == 0.25
    assert build_parser().parse_args(["worker", "--app", "m:app"]).priority_share is None


@pytest.mark.parametrize("value", ["1", "-0.1", "half"])
def test_worker_priority_share_refuses_what_is_not_a_fraction(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["worker", "--app", "m:app", "--priority-share", value])
    assert exit_.value.code == 2
    assert "fraction" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["worker", "--app", "m:app"], ["relay"]])
def test_the_commands_that_run_a_node_take_their_event_loop(command: list[str]) -> None:
    assert build_parser().parse_args(command).loop == "auto"
    for loop in ("asyncio", "uvloop"):
        assert build_parser().parse_args([*command, "--loop", loop]).loop == loop


@pytest.mark.parametrize(
    "command", [["worker", "--app", "m:app"], ["relay", "--broker-url", "amqp://127.0.0.1/"]]
)
def test_loop_uvloop_without_uvloop_says_what_to_do_in_one_line(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before anything else: no database is opened, no app imported."""
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop fails
    database = tmp_path / "d.db"
    code = main([*command, "--loop", "uvloop", "--database-url", f"sqlite:///{database}"])
    assert code == 1
    assert capsys.readouterr().err == (
        "duetime: error: the uvloop event loop is not installed here: pip install uvloop, "
        "or run with --loop asyncio\n"
    )
    assert not database.exists()

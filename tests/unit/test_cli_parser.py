"""The CLI's flags are a public contract: parse them without touching a database."""

from __future__ import annotations

import pytest

from duetime.cli import build_parser


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
    assert (args.task, args.delay, args.key, args.queue) == ("send", "30s", "k", "q")
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

"""Cron expressions in plain words: the common shapes read as a sentence, the rest give None."""

from __future__ import annotations

import pytest

from duetime.core.cron_words import describe_cron


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("0 9 * * 1-5", "at 09:00 on Monday to Friday"),
        ("30 9 * * MON-FRI", "at 09:30 on Monday to Friday"),
        ("0 9 * * 1", "at 09:00 on Monday"),
        ("0 9 * * 1,3,5", "at 09:00 on Monday, Wednesday and Friday"),
        ("0 18 * * 0", "at 18:00 on Sunday"),
        ("0 18 * * 7", "at 18:00 on Sunday"),
        ("0 9,17 * * *", "at 09:00 and 17:00 every day"),
        ("0 3 * * *", "at 03:00 every day"),
        ("@daily", "at 00:00 every day"),
        ("@weekly", "at 00:00 on Sunday"),
        ("@monthly", "at 00:00 on the 1st of every month"),
        ("@yearly", "at 00:00 on 1 January"),
        ("@hourly", "every hour at :00"),
        ("* * * * *", "every minute"),
        ("*/5 * * * *", "every 5 minutes"),
        ("*/15 * * * 1-5", "every 15 minutes on Monday to Friday"),
        ("15,45 * * * *", "every hour at :15 and :45"),
        ("0 */2 * * *", "every 2 hours at :00"),
        ("0 9-17 * * 1-5", "every hour from 09:00 to 17:00 on Monday to Friday"),
        ("0 0 1,15 * *", "at 00:00 on the 1st and 15th of every month"),
        ("0 0 22 * *", "at 00:00 on the 22nd of every month"),
        ("0 12 * 1,7 *", "at 12:00 every day in January and July"),
        ("0 8 1,15 3 *", "at 08:00 on the 1st and 15th in March"),
        ("0 0 9 * * *", "at 09:00 every day"),  # six fields, seconds first
    ],
)
def test_common_shapes_read_as_words(expr: str, words: str) -> None:
    assert describe_cron(expr) == words


@pytest.mark.parametrize(
    "expr",
    [
        "0 9 1 * 1",  # a day of the month and a weekday: cron fires on either
        "*/15 9 * * *",  # a step within one hour
        "0 0 L * *",
        "5 0 * * 1#2",
        "30 0 9 * * *",  # seconds other than 0
        "0 0-23/2 * * *",
        "0 1,2,3,4,5,6,7 * * *",  # too many times for one sentence
        "not cron",
    ],
)
def test_other_shapes_give_none_so_the_expression_is_shown(expr: str) -> None:
    assert describe_cron(expr) is None


def test_the_dashboard_reads_a_one_value_range_with_a_step_as_cron_does() -> None:
    from duetime.core.cron import cronsim_text

    assert describe_cron(cronsim_text("0 9 * * 3-3/3")) == "at 09:00 on Wednesday"

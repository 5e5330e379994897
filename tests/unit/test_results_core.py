"""The bounds of results and progress reports (core/results.py): stored whole or refused,
never cut; the same checks wherever a value comes from."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from duetime.core.errors import ConfigurationError, InvalidRequest
from duetime.core.results import (
    MAX_RESULT_BYTES_CEILING,
    ResultRejected,
    check_progress,
    check_result_limit,
    decode_result,
    encode_result,
)


@pytest.mark.parametrize(
    "value",
    [{"b": 1, "a": [1, 2.5, "é", None, True]}, [], "text", 0, -1.25, False, {"nested": {"x": []}}],
)
def test_json_data_is_stored_compact_and_read_back(value: Any) -> None:
    text = encode_result(value, 1000)
    assert text is not None and " " not in text.replace("é", "")
    assert decode_result(text) == value


def test_none_stores_nothing_and_a_tuple_is_a_list() -> None:
    assert encode_result(None, 1) is None and decode_result(None) is None
    assert decode_result(encode_result((1, 2), 100)) == [1, 2]
    assert list(json.loads(encode_result({"b": 1, "a": 2}, 100) or "{}")) == ["b", "a"]


def test_the_limit_counts_utf8_bytes_and_nothing_is_cut() -> None:
    assert encode_result("é" * 4, 10) == '"éééé"'  # 8 bytes + 2 quotes
    with pytest.raises(ResultRejected, match="is 12 bytes of JSON, over the result limit of 11"):
        encode_result("é" * 5, 11)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ({1, 2}, "set"),
        (b"raw", "bytes"),
        (object(), "object"),
        (math.nan, "float"),
        ({"x": math.inf}, "dict"),
    ],
)
def test_what_is_not_json_is_refused_naming_its_type(value: Any, kind: str) -> None:
    with pytest.raises(ResultRejected, match=f"returned a {kind} that is not JSON-serialisable"):
        encode_result(value, 1000)


def test_a_nul_is_escaped_and_an_unpaired_surrogate_refused() -> None:
    assert decode_result(encode_result("a\x00b", 1000)) == "a\x00b"  # JSON writes \u0000
    with pytest.raises(ResultRejected, match="an unpaired surrogate"):
        encode_result("\ud800", 1000)


def test_limits_are_bounded() -> None:
    assert check_result_limit(1) == 1
    assert check_result_limit(MAX_RESULT_BYTES_CEILING) == MAX_RESULT_BYTES_CEILING
    for bad in (0, MAX_RESULT_BYTES_CEILING + 1, 1.5, True, "64k"):
        with pytest.raises(ConfigurationError, match="result_max_bytes must be"):
            check_result_limit(bad)  # type: ignore[arg-type]


def test_progress_reports_are_checked() -> None:
    assert check_progress(0) == (0.0, None)
    assert check_progress(1, "done") == (1.0, "done")
    assert check_progress(0.5, "x" * 200) == (0.5, "x" * 200)
    for fraction in (-0.01, 1.01, math.nan, math.inf, "0.5", None, True):
        with pytest.raises(InvalidRequest, match="progress must be a number from 0 to 1"):
            check_progress(fraction)
    with pytest.raises(InvalidRequest, match="at most 200 characters, not 201"):
        check_progress(0.5, "x" * 201)
    with pytest.raises(InvalidRequest, match="must be text"):
        check_progress(0.5, 7)
    with pytest.raises(InvalidRequest, match="NUL"):
        check_progress(0.5, "a\x00")

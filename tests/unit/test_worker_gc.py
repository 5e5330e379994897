"""duetime worker's collector tuning (docs/workers.md, "The garbage collector")."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from duetime.cli import build_parser, worker


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_tuning_freezes_the_start_and_spaces_the_young_passes() -> None:
    gc.set_threshold(*worker._INTERPRETER_GC_THRESHOLD)
    worker.tune_gc()
    assert gc.get_threshold() == (10_000, 10, 10)
    assert gc.get_freeze_count() > 0


def test_thresholds_the_app_set_are_kept() -> None:
    gc.set_threshold(1234, 5, 6)
    worker.tune_gc()
    assert gc.get_threshold() == (1234, 5, 6)


def test_no_gc_tuning_is_a_flag_of_the_worker() -> None:
    parser = build_parser()
    args = parser.parse_args(["worker", "--app", "m:a", "--no-gc-tuning"])
    assert args.no_gc_tuning is True
    assert parser.parse_args(["worker", "--app", "m:a"]).no_gc_tuning is False

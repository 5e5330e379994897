"""store/sql/attempt_ids.py: the blocks of attempt ids a MariaDB/MySQL process reserves (hi/lo),
and nothing reserved where the dialect's claim gives ids itself."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from duetime.core.errors import StoreError
from duetime.store.sql.attempt_ids import AttemptIds


class Counter:
    """A driver whose reserve_attempt_ids hands out blocks from a counter, as the MySQL
    statement does (or answers NULL, or no row)."""

    def __init__(self, start: int | None = 1, row: bool = True) -> None:
        self.next = start
        self.row = row
        self.reservations: list[int] = []

    @contextmanager
    def transaction(self) -> Iterator[Counter]:
        yield self

    def one(self, name: str, /, **params: Any) -> dict[str, Any] | None:
        assert name == "reserve_attempt_ids"
        if not self.row:
            return None
        self.reservations.append(params["count"])
        first = self.next
        if self.next is not None:
            self.next += params["count"]
        return {"first_id": first}


def test_claims_take_consecutive_ids_from_one_block_and_a_new_block_when_it_runs_out() -> None:
    db = Counter(start=100)
    ids = AttemptIds(db, block=10)  # type: ignore[arg-type]
    first = ids.take(4)
    second = ids.take(4)
    assert (first.first, second.first) == (100, 104)
    assert first.params == {"first_attempt_id": 100}
    third = ids.take(4)  # 108 + 4 > 110: a new block
    assert third.first == 110 and db.reservations == [10, 10]
    big = ids.take(25)  # more than a block: a block of its size
    assert big.first == 120 and db.reservations == [10, 10, 25]


def test_unused_ids_go_back_only_when_no_claim_took_ids_since() -> None:
    ids = AttemptIds(Counter(start=1), block=100)  # type: ignore[arg-type]
    first = ids.take(10)
    first.used([{"attempt_id": 1}, {"attempt_id": 3}])  # ids 1..3 used (in job id order)
    ids.give_back(first)
    again = ids.take(10)
    assert again.first == 4  # 4..10 were given back
    later = ids.take(5)
    assert later.first == 14
    again.used([])  # used none, but a claim took ids after it: nothing goes back
    ids.give_back(again)
    assert ids.take(1).first == 19
    empty = ids.take(3)
    ids.give_back(empty)  # used none, the last taken: all of it goes back
    assert ids.take(1).first == empty.first


def test_a_dialect_that_gives_ids_itself_is_asked_once() -> None:
    db = Counter(start=None)
    ids = AttemptIds(db)  # type: ignore[arg-type]
    assert ids.take(10).params == {} and ids.take(10).first is None
    assert db.reservations == [1000]  # asked once, never again
    reserved = ids.take(3)
    reserved.used([{"attempt_id": 7}])
    ids.give_back(reserved)  # nothing to give back


def test_a_missing_counter_row_is_refused() -> None:
    ids = AttemptIds(Counter(row=False))  # type: ignore[arg-type]
    # the running attempts' ids are on their jobs' rows, above every ended attempt's maybe:
    # a counter restored from duetime_attempts alone would give them out again
    with pytest.raises(StoreError, match=r"duetime_attempt_ids.*duetime_jobs\.attempt_id"):
        ids.take(1)


def test_threads_never_share_an_id() -> None:
    ids = AttemptIds(Counter(start=1), block=7)  # type: ignore[arg-type]
    taken: list[int] = []
    lock = threading.Lock()

    def claim() -> None:
        for _ in range(200):
            reserved = ids.take(3)
            assert reserved.first is not None
            with lock:
                taken.extend(range(reserved.first, reserved.first + 3))

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(taken) == len(set(taken)) == 2400

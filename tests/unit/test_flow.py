"""The pure maths of flow control (duetime/core/flow/): which candidates a controlled claim
starts under caps, and how weights split its slots."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.core.errors import InvalidRequest
from duetime.core.flow.choice import Candidate, RoundRobin, choose, full, room
from duetime.core.flow.parsers import check_limit, check_weight, parse_limit
from duetime.core.flow.records import FlowControls, TenantSettings
from duetime.core.outbox import QueueSettings


def cands(*pairs: tuple[str, str]) -> list[Candidate]:
    return [Candidate(i + 1, q, t) for i, (q, t) in enumerate(pairs)]


def test_without_weights_candidates_go_in_order_within_caps() -> None:
    c = cands(("a", "x"), ("a", "x"), ("b", "x"), ("a", "y"), ("b", "y"))
    q_room, t_room = {"a": 1}, {"x": 2}
    assert choose(c, 10, q_room, t_room) == [1, 3, 5]
    assert q_room == {"a": 0} and t_room == {"x": 0}  # the rooms used are counted down


def test_the_limit_bounds_the_claim() -> None:
    assert choose(cands(*[("a", "x")] * 5), 2, {}, {}) == [1, 2]
    assert choose(cands(("a", "x")), 0, {}, {}) == []


def test_room_never_goes_below_zero_and_full_names_them() -> None:
    r = room({"a": 3, "b": 1, "c": 2}, {"a": 1, "b": 4})
    assert r == {"a": 2, "b": 0, "c": 2}
    assert full(r) == ["b"]


def test_weights_split_slots_between_queues() -> None:
    c = cands(*[("light", "t")] * 20, *[("heavy", "t")] * 20)
    taken = choose(c, 8, {}, {}, {"heavy": 3}, {})
    by_queue = Counter(c[i - 1].queue for i in taken)
    assert by_queue == {"heavy": 6, "light": 2}


def test_weights_split_a_queue_between_its_tenants_and_each_keeps_its_order() -> None:
    c = cands(*[("q", "big")] * 10, *[("q", "small")] * 10)
    taken = choose(c, 4, {}, {}, {}, {"big": 1, "small": 1})
    assert Counter(c[i - 1].tenant for i in taken) == {"big": 2, "small": 2}
    assert [i for i in taken if c[i - 1].tenant == "big"] == [1, 2]


@pytest.mark.parametrize("slots", [1, 2, 3])
def test_carried_credit_splits_small_claims_as_the_weights(slots: int) -> None:
    """Claims of a few slots each (a worker whose slots free one or two at a time): with the
    credit carried from claim to claim, a weight-3 queue gets 3 of every 4 slots; without it,
    each claim is a round robin's first turns (every 1-slot claim to the weight-3 queue)."""

    def run(credit: dict[str, float] | None) -> Counter[str]:
        got: Counter[str] = Counter()
        for _ in range(120 // slots):
            c = cands(*[("light", "t")] * 4, *[("heavy", "t")] * 4)  # light's due first
            for i in choose(c, slots, {}, {}, {"heavy": 3.0}, {}, credit):
                got[c[i - 1].queue] += 1
        return got

    carried = run({})
    assert abs(carried["heavy"] - 90) <= 1 and carried["heavy"] + carried["light"] == 120
    assert run(None)["heavy"] != 90  # each claim alone: 120 (1 slot), 60 (2), 80 (3)


def test_carried_credit_stays_centred_and_forgets_absent_queues() -> None:
    credit: dict[str, float] = {}
    for _ in range(50):
        choose(cands(("a", "t"), ("b", "t")), 1, {}, {}, {"a": 5.0}, {}, credit)
    assert set(credit) == {"a", "b"} and abs(sum(credit.values())) < 1e-9
    choose(cands(("b", "t")), 1, {}, {}, {"a": 5.0}, {}, credit)
    assert set(credit) == {"b"}


def test_a_full_tenant_drops_out_of_every_queue() -> None:
    c = cands(*[("a", "x")] * 3, *[("b", "x")] * 3, *[("b", "y")] * 3)
    taken = choose(c, 9, {}, {"x": 2}, {"a": 2}, {})
    assert Counter(c[i - 1].tenant for i in taken) == {"x": 2, "y": 3}


def test_smooth_round_robin_interleaves() -> None:
    rr = RoundRobin()
    rr.add("a", 2)
    rr.add("b", 1)
    assert [rr.next() for _ in range(6)] == ["a", "b", "a", "a", "b", "a"]


def test_controls_know_what_restricts_a_claim() -> None:
    assert not FlowControls.of([QueueSettings("q")], [TenantSettings("t")]).restricts_claim
    only_backlog = FlowControls.of([QueueSettings("q", max_backlog=5)], [])
    assert not only_backlog.restricts_claim and only_backlog.bounds_backlog
    assert FlowControls.of([QueueSettings("q", paused=True)], []).restricts_claim
    assert FlowControls.of([], [TenantSettings("t", concurrency=0)]).capped
    assert FlowControls.of([QueueSettings("q", weight=2)], []).weighted


def test_controls_know_what_restricts_the_relays_dispatch() -> None:
    def of(queues: list[QueueSettings], tenants: list[TenantSettings]) -> FlowControls:
        return FlowControls.of(queues, tenants)

    outbox = ["ob"]
    assert not of([QueueSettings("ob")], [TenantSettings("t")]).restricts_dispatch(outbox)
    # a pause is the dispatch statement's own; a direct queue's controls are not its business
    assert not of([QueueSettings("ob", paused=True)], []).restricts_dispatch(outbox)
    assert not of([QueueSettings("ob", max_backlog=5)], []).restricts_dispatch(outbox)
    direct = of([QueueSettings("db", concurrency=1, weight=2)], [])
    assert direct.restricts_claim and not direct.restricts_dispatch(outbox)
    assert of([QueueSettings("ob", concurrency=0)], []).restricts_dispatch(outbox)
    assert of([QueueSettings("ob", weight=3)], []).restricts_dispatch(outbox)
    assert of([], [TenantSettings("t", concurrency=2)]).restricts_dispatch(outbox)
    assert of([], [TenantSettings("t", weight=2)]).restricts_dispatch(outbox)
    assert not of([QueueSettings("ob", concurrency=1)], []).restricts_dispatch([])


def test_limits_are_checked() -> None:
    assert parse_limit("none", "x") is None and parse_limit("3", "x") == 3
    with pytest.raises(InvalidRequest, match="whole number"):
        parse_limit("-1", "concurrency")
    with pytest.raises(InvalidRequest):
        check_limit(True, "concurrency")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="weight"):
        check_weight(0)
    assert check_weight(2) == 2.0 and check_weight(None) is None


names = st.sampled_from(["a", "b", "c"])
candidate_lists = st.lists(st.tuples(names, st.sampled_from(["x", "y", "z"])), max_size=40)
caps = st.dictionaries(names, st.integers(0, 5), max_size=3)
tenant_caps = st.dictionaries(st.sampled_from(["x", "y", "z"]), st.integers(0, 5), max_size=3)
weights = st.dictionaries(names, st.floats(0.1, 10), max_size=3)


@settings(max_examples=300, deadline=None)
@given(candidate_lists, st.integers(0, 30), caps, tenant_caps, weights, st.booleans())
def test_choose_never_passes_a_cap_nor_the_limit_and_wastes_no_slot(
    pairs: list[tuple[str, str]],
    limit: int,
    q_caps: dict[str, int],
    t_caps: dict[str, int],
    q_weights: dict[str, float],
    weighted: bool,
) -> None:
    c = cands(*pairs)
    q_room, t_room = dict(q_caps), dict(t_caps)
    taken = choose(c, limit, q_room, t_room, q_weights if weighted else {}, {})
    assert len(taken) == len(set(taken)) <= limit
    chosen = [c[i - 1] for i in taken]
    for q, cap in q_caps.items():
        assert sum(1 for x in chosen if x.queue == q) <= cap
    for t, cap in t_caps.items():
        assert sum(1 for x in chosen if x.tenant == t) <= cap
    if len(taken) < limit:  # a slot left empty: every candidate not taken had no room
        left = [x for x in c if x.id not in taken]
        assert all(q_room.get(x.queue, 1) <= 0 or t_room.get(x.tenant, 1) <= 0 for x in left), (
            "a candidate with room was left although slots were free"
        )
    # within a queue and tenant, the candidates go in their order
    for key in {(x.queue, x.tenant) for x in chosen}:
        mine = [x.id for x in c if (x.queue, x.tenant) == key]
        got = [i for i in taken if (c[i - 1].queue, c[i - 1].tenant) == key]
        assert sorted(got) == mine[: len(got)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=5), st.integers(1, 200))
def test_round_robin_shares_stay_within_one_slot_of_the_weights(
    ws: list[float], turns: int
) -> None:
    rr = RoundRobin()
    for i, w in enumerate(ws):
        rr.add(str(i), w)
    got = Counter(rr.next() for _ in range(turns))
    total = sum(ws)
    for i, w in enumerate(ws):
        assert abs(got[str(i)] - turns * w / total) < len(ws)

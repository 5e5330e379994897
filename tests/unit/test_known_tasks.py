"""An App that registers tasks refuses, at enqueue, a task it does not know and args its
handler cannot take (nothing is stored); typed tasks enqueue with the handler's own arguments."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import duetime
from duetime import App, ArgsMismatch, InvalidRequest, UnknownTask
from duetime.core.clock import ManualClock

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    application = App(f"sqlite:///{tmp_path / 'known.db'}", clock=ManualClock(NOW))

    @application.task(name="greet")
    def greet(name: str, greeting: str = "hello") -> str:
        return f"{greeting}, {name}"

    @application.task(name="anything")
    def anything(**fields: object) -> None:
        pass

    yield application
    application.close()


def stored(app: App) -> int:
    return len(app.list_jobs())


def test_errors_are_invalid_requests_exported_from_duetime() -> None:
    assert issubclass(UnknownTask, InvalidRequest) and issubclass(ArgsMismatch, InvalidRequest)
    assert {"UnknownTask", "ArgsMismatch"} <= set(duetime.__all__)


def test_an_unknown_task_is_refused_and_nothing_is_stored(app: App) -> None:
    with pytest.raises(UnknownTask, match=r"task 'nosuch' is not registered.*greet") as caught:
        app.enqueue("nosuch", {})
    assert caught.value.task == "nosuch"
    with pytest.raises(UnknownTask):
        app.enqueue_many("nosuch", [{}])
    assert stored(app) == 0


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({"nam": "x"}, "missing a required argument: 'name'"),
        ({"name": "x", "nam": "y"}, "unexpected keyword argument 'nam'"),
        (None, "missing a required argument: 'name'"),
    ],
    ids=["misspelt", "extra", "none"],
)
def test_args_that_do_not_bind_are_refused(app: App, args: dict[str, str], reason: str) -> None:
    with pytest.raises(ArgsMismatch, match=reason) as caught:
        app.enqueue("greet", args)
    assert "greet(name, greeting='hello')" in str(caught.value)
    assert str(caught.value).startswith("args ")  # the API names the field from the message
    assert stored(app) == 0


def test_a_batch_with_one_bad_args_stores_nothing(app: App) -> None:
    with pytest.raises(ArgsMismatch, match=r"job 2 of 3"):
        app.enqueue_many("greet", [{"name": "a"}, {"nam": "b"}, {"name": "c"}])
    assert stored(app) == 0


def test_args_that_bind_are_stored(app: App) -> None:
    app.enqueue("greet", {"name": "Ada"})
    app.enqueue("anything", {"x": 1, "y": 2})  # **kwargs takes any name
    app.enqueue_many("greet", [{"name": "a"}, {"name": "b", "greeting": "hi"}])
    assert stored(app) == 4


def test_an_app_without_tasks_enqueues_any_task(tmp_path: Path) -> None:
    producer = App(f"sqlite:///{tmp_path / 'producer.db'}")
    try:
        job = producer.enqueue("served.elsewhere", {"whatever": 1})
        assert producer.get_job(job.id).task == "served.elsewhere"
        producer.check_args("served.elsewhere", {"x": 1})  # cannot tell: accepted
    finally:
        producer.close()


def test_check_args_says_what_enqueue_would(app: App) -> None:
    app.check_args("greet", {"name": "x"})
    with pytest.raises(UnknownTask):
        app.check_args("nosuch")
    with pytest.raises(ArgsMismatch):
        app.check_args("greet", {})


# -- typed tasks --------------------------------------------------------------------------------


def test_defer_stores_the_handler_arguments_by_name(app: App) -> None:
    greet = app.tasks["greet"]
    job = greet.defer("Ada", greeting="hi")
    assert job.args == {"name": "Ada", "greeting": "hi"} and job.due_at == NOW
    later = greet.defer_at(NOW + timedelta(hours=1), name="Bob")
    assert later.args == {"name": "Bob"} and later.due_at == NOW + timedelta(hours=1)
    soon = greet.defer_in("5m", name="Cy")
    assert soon.due_at == NOW + timedelta(minutes=5)
    keyed = greet.options(key="k", priority=5).defer(name="Di")
    assert greet.options(key="k", priority=5).defer(name="Di").id == keyed.id
    assert keyed.priority == 5
    spread = app.tasks["anything"].defer(a=1, b="two")
    assert spread.args == {"a": 1, "b": "two"}


def test_defer_refuses_arguments_the_handler_does_not_take(app: App) -> None:
    greet = app.tasks["greet"]
    with pytest.raises(ArgsMismatch, match="unexpected keyword argument 'nam'"):
        greet.defer(name="x", nam="y")
    assert stored(app) == 0


def test_adefer_is_the_async_twin(app: App) -> None:
    job = asyncio.run(app.tasks["greet"].adefer(name="Ada"))
    assert job.args == {"name": "Ada"}


# -- schedules ----------------------------------------------------------------------------------


def test_schedules_of_known_tasks_are_checked_too(app: App) -> None:
    hourly = {"cron": "0 * * * *", "timezone": "UTC"}
    with pytest.raises(UnknownTask):
        app.add_schedule("s", task="nosuch", **hourly)
    with pytest.raises(ArgsMismatch, match="missing a required argument: 'name'"):
        app.add_schedule("s", task="greet", **hourly)
    assert app.list_schedules() == []
    app.add_schedule("s", task="greet", args={"name": "Ada"}, **hourly)
    with pytest.raises(ArgsMismatch, match="unexpected keyword argument 'nam'"):
        app.update_schedule("s", args={"name": "Ada", "nam": "x"})
    assert app.get_schedule("s").spec.args == {"name": "Ada"}
    with pytest.raises(ArgsMismatch):

        @app.schedule("nightly", cron="0 3 * * *", timezone="UTC")
        @app.task(name="needs")
        def needs(day: str) -> None:
            pass


def test_names_once_accepted_are_not_bound_again_but_others_still_are(app: App) -> None:
    greet = app.tasks["greet"]
    greet.check_args({"name": "a"})
    assert frozenset({"name"}) in greet._accepted
    greet.check_args({"name": "b"})  # the same names: accepted without binding
    with pytest.raises(ArgsMismatch, match="unexpected keyword argument 'nam'"):
        greet.check_args({"name": "c", "nam": "d"})
    assert frozenset({"name", "nam"}) not in greet._accepted


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (
            {"nam": "x"},
            "unexpected keyword argument 'nam'; missing a required argument: 'name'; "
            "its handler takes greet(name, greeting='hello')",
        ),
        (
            {"nam": "x", "greting": "hi"},
            "unexpected keyword arguments 'nam', 'greting'; missing a required argument: "
            "'name'; its handler takes greet(name, greeting='hello')",
        ),
        (
            {},
            "missing a required argument: 'name'; its handler takes greet(name, greeting='hello')",
        ),
    ],
    ids=["typo", "two-typos", "nothing"],
)
def test_a_refusal_names_the_unexpected_keywords_then_the_missing_then_the_signature(
    app: App, args: dict[str, str], reason: str
) -> None:
    """Issue 20, section 4: a typo `nam` was never named, only the `name` it left missing."""
    with pytest.raises(ArgsMismatch) as enqueued:
        app.enqueue("greet", args)
    assert str(enqueued.value) == (
        f"args do not fit task 'greet': {reason}; pass its parameters by name as a JSON object"
    )
    with pytest.raises(ArgsMismatch) as deferred:
        app.tasks["greet"].defer(**args)
    assert str(deferred.value) == str(enqueued.value)


def test_a_handler_with_required_keywords_names_each_missing_one(app: App) -> None:
    @app.task(name="pair")
    def pair(left: int, *, right: int, note: str = "") -> None:
        pass

    with pytest.raises(ArgsMismatch, match=r"missing required arguments: 'left', 'right'; its "):
        app.enqueue("pair", {"note": "x"})

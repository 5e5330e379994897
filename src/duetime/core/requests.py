"""Validation of enqueue requests: every bad input is refused here, before any I/O. One
module past 450 lines so that the one set of bounds (names, payloads, instants, durations,
keys, parents) is applied by every edge alike."""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from typing import Any

from duetime.core.dependencies import on_parent_failure as check_on_parent_failure
from duetime.core.dependencies import parent_ids
from duetime.core.durations import bounded_duration, parse_duration
from duetime.core.errors import InvalidRequest, PayloadTooLarge
from duetime.core.limits import check_limit_keys
from duetime.core.models import JobParts, JSONObject, NewJob, NewJobs, made, variant
from duetime.core.retry import RetryPolicy

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 10
DEFAULT_LEASE_SECONDS = 30.0


def parse_instant(value: datetime | str, what: str) -> datetime:
    """Parse an aware datetime or an ISO 8601 string with an offset; return it in UTC."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidRequest(
                f"{what} {value!r} is not an ISO 8601 time; write it like 2026-03-01T09:00:00+01:00"
            ) from None
    elif isinstance(value, datetime):
        parsed = value
    else:
        raise InvalidRequest(f"{what} must be a datetime or an ISO 8601 string")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise InvalidRequest(
            f"{what} {parsed.isoformat()} has no UTC offset; give one, e.g. "
            f"{parsed.replace(tzinfo=UTC).isoformat()}"
        )
    return parsed.astimezone(UTC)


@dataclass(frozen=True)
class TaskDefaults:
    """What a registered task contributes to a job unless the enqueue call overrides it."""

    queue: str = DEFAULT_QUEUE
    priority: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    timeout_seconds: float | None = None
    limits: tuple[str, ...] = ()  # limit keys of the dependencies it calls (core/limits.py)
    max_lateness_seconds: float | None = None  # None: a job may start however late
    on_late: str = "expire"  # a job later than that: "expire" it, or "run" it anyway
    sequence: str | None = None  # a template over the args: its jobs' sequence key
    sequence_on_dead: str = "release"  # a dead job of its sequence: "release" the next, "hold"
    unique_for_seconds: float | None = None  # its jobs' unique window (None: not unique)

    @property
    def expires_late(self) -> bool:
        """Whether jobs of the task get a deadline of due time + max lateness."""
        return self.max_lateness_seconds is not None and self.on_late == ON_LATE_EXPIRE


ON_LATE_EXPIRE = "expire"
ON_LATE_RUN = "run"
ON_LATE = (ON_LATE_EXPIRE, ON_LATE_RUN)


def check_lateness(
    max_lateness: str | float | timedelta | None, on_late: str, what: str
) -> float | None:
    """A task's max_lateness in seconds (None: no bound) after checking it and on_late."""
    if on_late not in ON_LATE:
        raise InvalidRequest(f"{what}: on_late must be 'expire' or 'run', got {on_late!r}")
    if max_lateness is None:
        return None
    seconds = parse_duration(max_lateness, "max_lateness").total_seconds()
    if seconds <= 0:
        raise InvalidRequest(
            f"{what}: max_lateness must be more than 0 seconds (a job due now could never "
            "start); leave it out for no bound"
        )
    return seconds


def late_deadline(
    due_at: datetime, deadline_at: datetime | None, defaults: TaskDefaults
) -> datetime | None:
    """The deadline a job gets: the earlier of `deadline_at` (given at enqueue) and, for a
    task with max_lateness and on_late="expire", due_at + max_lateness."""
    if not defaults.expires_late or defaults.max_lateness_seconds is None:
        return deadline_at
    bound = due_at + timedelta(seconds=defaults.max_lateness_seconds)
    return bound if deadline_at is None else min(deadline_at, bound)


def check_name(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{what} must be a non-empty string")
    if "\x00" in value:
        raise InvalidRequest(f"{what} must not contain a NUL character")
    if len(value) > limit:
        raise InvalidRequest(f"{what} is {len(value)} characters; the limit is {limit}")
    return value


def check_url_name(value: Any, what: str, limit: int) -> str:
    """check_name for a name that URLs carry as one path segment (queues, tenants, schedules:
    /v1/queues/{name}, the dashboard's forms): '.' and '..' are refused, since browsers and
    HTTP clients resolve them as "this" and "the parent" folder even when escaped (%2e)."""
    name = check_name(value, what, limit)
    if name in (".", ".."):
        raise InvalidRequest(
            f"{what} {name!r} is refused: '.' and '..' cannot be written in a URL; "
            "choose another name"
        )
    return name


def _check_int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{what} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise InvalidRequest(f"{what} must be between {low} and {high}, got {value}")
    return value


MAX_ID = 2**63 - 1  # job, schedule and token ids: BIGINT columns


def parse_id(text: str, what: str) -> int:
    """An id as typed (ASCII digits, 1 to MAX_ID), or InvalidRequest: a larger number would
    not fit the column (SQLite raised OverflowError)."""
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 19 or int(digits) == 0:
        raise InvalidRequest(f"{what} must be a whole number from 1 to {MAX_ID}, got {text!r}")
    number = int(digits)
    if number > MAX_ID:
        raise InvalidRequest(f"{what} must be a whole number from 1 to {MAX_ID}, got {text!r}")
    return number


TENANT_LIMIT = 100  # characters
MAX_ARGS_DEPTH = 64  # deeper JSON is refused: parsers and serializers give up around 500


def _nesting(value: Any) -> int:
    """How deeply lists and objects nest in value (iteratively: no recursion limit)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack and deepest <= MAX_ARGS_DEPTH:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, Mapping) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, Mapping | list | tuple))
    return deepest


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def check_nesting(text: str) -> None:
    """Refuse JSON text whose lists and objects nest more than MAX_ARGS_DEPTH deep, before
    it is parsed: a parser recursing into 1,000 levels fails with RecursionError."""
    if text.count("[") + text.count("{") > MAX_ARGS_DEPTH:
        bare = _JSON_STRING.sub("", text)
        depth = max(accumulate(_DEPTH_STEP.get(c, 0) for c in bare), default=0)
        if depth > MAX_ARGS_DEPTH:
            raise InvalidRequest(
                f"args nest more than {MAX_ARGS_DEPTH} levels deep; flatten the structure"
            )


def load_args(text: str) -> Any:
    """JSON text typed as args (the dashboard's forms), its nesting checked first. The value
    is not checked further (dump_args does that)."""
    check_nesting(text)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidRequest(f"args are not JSON ({exc}); write an object like {{}}") from None


def dump_args(args: Any, max_bytes: int) -> tuple[dict[str, Any], str]:
    """Check that args are a JSON object within the size limit; return it and its JSON text.

    Serialised once; the slower checks (nesting depth, lone surrogates) run only when the text
    shows they could fail.
    """
    if args is None:
        args = {}
    if type(args) is not dict and not isinstance(args, Mapping):
        raise InvalidRequest(
            f"args must be a JSON object (a dict with string keys), got {type(args).__name__}"
        )
    if not _STR.issuperset(map(type, args)) and not all(isinstance(k, str) for k in args):
        raise InvalidRequest("args must be a JSON object: every key must be a string")
    try:
        text = _encode_args(args)
    except RecursionError:  # far too deep, or circular (the encoder keeps no record of that)
        raise InvalidRequest(
            f"args nest more than {MAX_ARGS_DEPTH} levels deep or contain themselves; "
            "flatten the structure"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"args must be plain JSON values: {exc}") from None
    if text.count("{") + text.count("[") > MAX_ARGS_DEPTH and _nesting(args) > MAX_ARGS_DEPTH:
        raise InvalidRequest(
            f"args nest more than {MAX_ARGS_DEPTH} levels deep; flatten the structure"
        )
    if "\\u0000" in text:
        raise InvalidRequest(
            "args contain a NUL character (\\u0000), which databases cannot store in JSON; "
            "remove it or encode the data (for example as base64)"
        )
    if "\\ud" in text:  # escaped surrogates: a pair is fine, a lone one is not Unicode
        try:
            json.dumps(args, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequest(
                "args contain a lone surrogate character, which is not valid Unicode; fix the text"
            ) from None
    size = len(text)  # ASCII: every other character is escaped
    if size > max_bytes:
        raise PayloadTooLarge(
            f"args are {size} bytes of JSON; the limit is {max_bytes} bytes "
            "(store large payloads elsewhere and pass a reference)"
        )
    if _FLAT.issuperset(map(type, args.values())):
        return dict(args), text  # what json.loads(text) would give, without parsing it
    return json.loads(text), text


# values that come back from JSON as they went in (exact types: subclasses may not)
_FLAT = frozenset({str, int, float, bool, type(None)})
_STR = frozenset({str})
# one encoder for every job's args (json.dumps with options builds a new one per call)
_ARGS_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False)


def _args_encoder() -> Callable[[Any], str]:
    """_ARGS_ENCODER.encode, made once: encode() builds json's C encoder again on every call
    (about half of its 1 us for a small object, paid per job of a bulk enqueue). This one
    keeps no record of the containers it is inside (encode's circular-reference check, whose
    record is not safe to share between calls or threads): a circular value recurses until
    RecursionError, which dump_args refuses as too deep. Without json's C accelerator (not
    CPython), encode itself."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _ARGS_ENCODER.encode
    e = _ARGS_ENCODER
    encode = make(
        None,  # no circular-reference record (above)
        e.default,
        json.encoder.encode_basestring_ascii,  # ensure_ascii, as _ARGS_ENCODER
        e.indent,
        e.key_separator,
        e.item_separator,
        e.sort_keys,
        e.skipkeys,
        e.allow_nan,
    )

    def encoded(value: Any) -> str:
        return "".join(encode(value, 0))

    return encoded


_encode_args = _args_encoder()


SEQUENCE_KEY_LIMIT = 255  # characters
UNIQUE_KEY_LIMIT = 255  # characters
UNIQUE_FOR_MIN_SECONDS = 1.0
UNIQUE_FOR_MAX_SECONDS = 366 * 86400.0
SEQUENCE_RELEASE = "release"
SEQUENCE_HOLD = "hold"
SEQUENCE_ON_DEAD = (SEQUENCE_RELEASE, SEQUENCE_HOLD)


def check_unique_for(value: str | float | timedelta, what: str = "unique_for") -> float:
    """A unique window in seconds, from 1 second to 366 days (every edge checks it here)."""
    return bounded_duration(value, what, UNIQUE_FOR_MIN_SECONDS, UNIQUE_FOR_MAX_SECONDS)


def check_sequence_template(template: str, sequence_on_dead: str, what: str) -> None:
    """A task's sequence template ("{account_id}": fields are argument names, nothing else)
    and its sequence_on_dead, checked once at registration."""
    if sequence_on_dead not in SEQUENCE_ON_DEAD:
        raise InvalidRequest(
            f"{what}: sequence_on_dead must be 'release' or 'hold', got {sequence_on_dead!r}"
        )
    check_name(template, f"{what}: sequence template", SEQUENCE_KEY_LIMIT)
    _template_fields(template, what)


def _template_fields(template: str, what: str) -> list[tuple[str, str | None]]:
    """The template as (literal text, argument name or None) pieces."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise InvalidRequest(
            f"{what}: sequence template {template!r} is malformed ({exc}); write it like "
            "'{account_id}' or 'ledger-{account_id}'"
        ) from None
    pieces: list[tuple[str, str | None]] = []
    for literal, name, spec, conversion in parts:
        if name is not None and (not name.isidentifier() or spec or conversion):
            raise InvalidRequest(
                f"{what}: sequence template {template!r} may name arguments only, like "
                f"'{{account_id}}'; got {{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}}"
            )
        pieces.append((literal, name))
    return pieces


def render_sequence(template: str, args: Mapping[str, Any], task: str) -> str:
    """A job's sequence key: the task's template with the job's argument values (a string as
    it is, any other JSON value as its JSON text)."""
    out = []
    for literal, name in _template_fields(template, f"task {task!r}"):
        out.append(literal)
        if name is None:
            continue
        if name not in args:
            raise InvalidRequest(
                f"task {task!r} puts its jobs in sequence {template!r}, but this job has no "
                f"argument {name!r}; pass it, or give the key with sequence="
            )
        value = args[name]
        out.append(value if isinstance(value, str) else _ARGS_ENCODER.encode(value))
    return check_name("".join(out), "sequence key", SEQUENCE_KEY_LIMIT)


@dataclass(frozen=True)
class JobKeys:
    """What puts a job in a sequence or makes it unique, checked once for a request; each
    job's keys come from its own args (keyed)."""

    task: str
    sequence: str | None = None  # a key given at enqueue, as it is
    template: str | None = None  # the task's template, else
    hold: bool = False
    unique_seconds: float | None = None
    unique_key: str | None = None

    @property
    def active(self) -> bool:
        """Whether the jobs get a sequence or unique key at all."""
        return not (self.sequence is None and self.template is None and self.unique_seconds is None)

    def keyed(self, job: NewJob, now: datetime) -> NewJob:
        """`job` with its sequence key and unique key (a digest) set, as this says."""
        if not self.active:
            return job
        sequence = self.sequence
        if sequence is None and self.template is not None:
            sequence = render_sequence(self.template, job.args, self.task)
        digest = None
        until = None
        if self.unique_seconds is not None:
            what: list[Any] = ["task", self.task]
            what += ["key", self.unique_key] if self.unique_key is not None else ["args", job.args]
            digest = hashlib.sha256(_ARGS_ENCODER.encode(what).encode()).hexdigest()
            until = now + timedelta(seconds=self.unique_seconds)
        return variant(
            job,
            sequence_key=sequence,
            sequence_hold=self.hold and sequence is not None,
            unique_key=digest,
            unique_until=until,
        )


def job_keys(
    task: str,
    defaults: TaskDefaults,
    *,
    key: str | None = None,
    sequence: str | None = None,
    unique_for: str | float | timedelta | None = None,
    unique_key: str | None = None,
) -> JobKeys:
    """A request's JobKeys: its own sequence= and unique_for= (with unique_key=), else the
    task's defaults. An idempotency key and a unique window do not mix: a key given with
    unique_for= is refused, and the task's unique_for does not apply to a keyed enqueue."""
    if sequence is not None:
        sequence = check_name(sequence, "sequence key", SEQUENCE_KEY_LIMIT)
    if unique_key is not None:
        unique_key = check_name(unique_key, "unique_key", UNIQUE_KEY_LIMIT)
        if unique_for is None and defaults.unique_for_seconds is None:
            raise InvalidRequest("unique_key needs a window: give unique_for= too, e.g. '10m'")
    seconds = None
    if unique_for is not None:
        seconds = check_unique_for(unique_for)
        if key is not None:
            raise InvalidRequest(
                "give either key= (idempotency, for good) or unique_for= (a window), not both"
            )
    elif key is None:
        seconds = defaults.unique_for_seconds
    return JobKeys(
        task=task,
        sequence=sequence,
        template=defaults.sequence if sequence is None else None,
        hold=defaults.sequence_on_dead == SEQUENCE_HOLD,
        unique_seconds=seconds,
        unique_key=unique_key,
    )


def build_new_job(
    task: str,
    args: Any,
    *,
    now: datetime,
    tenant: str,
    defaults: TaskDefaults,
    at: datetime | str | None = None,
    delay: str | float | timedelta | None = None,
    key: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    deadline: datetime | str | None = None,
    business_key: str | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    depends_on: Iterable[int | str] | None = None,
    on_parent_failure: str | None = None,
    sequence: str | None = None,
    unique_for: str | float | timedelta | None = None,
    unique_key: str | None = None,
    keyed: bool = True,
    linked: bool = False,
) -> NewJob:
    """Validate one enqueue request and turn it into a NewJob, or raise InvalidRequest.
    `keyed=False` leaves out the sequence and unique keys (a batch's template: job_keys
    gives each job its own). `linked`: the job also waits for jobs made with it, whose ids are
    not known yet (a chain's or a group's: Store.enqueue_graph adds them), so it has parents
    even without depends_on."""
    task = check_name(task, "task name", 200)
    tenant = check_url_name(tenant, "tenant", TENANT_LIMIT)
    args_obj, args_json = dump_args(args, max_payload_bytes)
    if at is not None and delay is not None:
        raise InvalidRequest("give either at= (an instant) or delay= (a duration), not both")
    parents = parent_ids(depends_on)
    waits = bool(parents) or linked
    if on_parent_failure is not None and not waits:
        raise InvalidRequest("on_parent_failure needs depends_on (the jobs this one waits for)")
    if linked and key is not None:
        raise InvalidRequest(
            "a step of a chain or group that waits for another takes no key; give the key to "
            "the first step, or enqueue the steps one by one with depends_on"
        )
    policy = check_on_parent_failure(on_parent_failure or "cancel") if waits else None
    release_delay: float | None = None
    due_spec: dict[str, Any]
    if at is not None:
        due_at = parse_instant(at, "due time")
        due_spec = {"at": due_at.isoformat()}
    elif delay is not None:
        wait = parse_duration(delay, "delay")
        due_at = now + wait
        due_spec = {"delay": wait.total_seconds()}
        release_delay = wait.total_seconds()
    else:
        due_at = now
        due_spec = {}
    deadline_at = parse_instant(deadline, "deadline") if deadline is not None else None
    if deadline_at is not None and deadline_at <= due_at:
        raise InvalidRequest(
            f"deadline {deadline_at.isoformat()} is not after the due time {due_at.isoformat()}; "
            "a job must be able to start before it expires"
        )
    queue = check_url_name(queue if queue is not None else defaults.queue, "queue", 100)
    prio = _check_int(defaults.priority if priority is None else priority, "priority", -1000, 1000)
    attempts = _check_int(
        defaults.max_attempts if max_attempts is None else max_attempts, "max_attempts", 1, 1000
    )
    if key is not None:
        key = check_name(key, "idempotency key", 255)
    if business_key is not None:
        business_key = check_name(business_key, "business key", 255)
    elif key is not None:
        business_key = f"{tenant}/{task}:{key}"
    digest = ""  # without a key there is no retried request to recognise
    if key is not None:
        fingerprint = {
            "task": task,
            "args": args_obj,
            "queue": queue,
            "priority": prio,
            "due": due_spec,
            "deadline": deadline_at.isoformat() if deadline_at else None,
            "max_attempts": attempts,
            "business_key": business_key,
        }
        if parents:
            fingerprint["depends_on"] = list(parents)
            fingerprint["on_parent_failure"] = str(policy)
        digest = hashlib.sha256(
            json.dumps(fingerprint, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
    if business_key is None:
        business_key = f"{tenant}/{task}:{os.urandom(16).hex()}"  # as enqueue_many's
    keys = job_keys(
        task, defaults, key=key, sequence=sequence, unique_for=unique_for, unique_key=unique_key
    )
    if waits and keys.active:
        raise InvalidRequest(
            "depends_on cannot be combined with a sequence or unique_for yet (the task's or "
            "this enqueue's); enqueue the job without one of them"
        )
    job = made(
        NewJob,
        tenant=tenant,
        task=task,
        args=args_obj,
        args_json=args_json,
        queue=queue,
        priority=prio,
        due_at=due_at,
        deadline_at=late_deadline(due_at, deadline_at, defaults),
        max_attempts=attempts,
        retry_base=defaults.retry.base,
        retry_cap=defaults.retry.cap,
        lease_seconds=defaults.lease_seconds,
        timeout_seconds=defaults.timeout_seconds,
        idempotency_key=key,
        request_hash=digest,
        business_key=business_key,
        limits=check_limit_keys(defaults.limits),
        parents=parents,
        on_parent_failure=str(policy) if policy is not None else None,
        release_delay=release_delay if waits else None,
    )
    return keys.keyed(job, now) if keyed else job


def build_new_jobs(
    template: NewJob,
    list_of_args: Iterable[Any],
    *,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    at_each: Sequence[datetime | str] | None = None,
    check: Callable[[JSONObject, int, int], None] | None = None,
    defaults: TaskDefaults | None = None,
    keys: JobKeys | None = None,
    now: datetime | None = None,
) -> NewJobs | list[NewJob]:
    """Many jobs of one request: `template` (from build_new_job, its options validated once)
    with each of `list_of_args` (checked as dump_args does, and by `check(args, number,
    count)` if given) and, with `at_each`, a due instant each. These jobs carry no idempotency
    key, so no request fingerprint is computed; each is the template with its own args, due
    time and business key (models.variant). The count and the due times are checked here;
    each job's args as the jobs are read (NewJobs), so a bad one raises from there.
    With `at_each`, give the template the deadline given at enqueue (not one derived) and
    the task's `defaults`: each job's deadline is then derived from its own due instant (for
    a task with max_lateness and on_late="expire"), and the jobs come as a plain list, made
    at once (their deadlines differ, which NewJobs' jobs may not). With `keys` (and `now`),
    each job gets its sequence and unique keys from its own args."""
    if template.idempotency_key is not None:
        raise InvalidRequest("a batch of jobs cannot share one idempotency key")
    args_list = list(list_of_args)
    count = len(args_list)
    dues: list[datetime] | None = None
    if at_each is not None:
        dues = [parse_instant(at, "due time") for at in at_each]
        if len(dues) != count:
            raise InvalidRequest(
                f"at_each has {len(dues)} instants for {count} jobs; give one per job"
            )
        if template.deadline_at is not None and any(d >= template.deadline_at for d in dues):
            raise InvalidRequest(
                f"a due time is not before the deadline {template.deadline_at.isoformat()}; "
                "a job must be able to start before it expires"
            )
    base = variant(template, request_hash="", idempotency_key=None)
    prefix = f"{template.tenant}/{template.task}:"
    late = defaults if dues is not None and defaults is not None and defaults.expires_late else None
    keyed = keys is not None and keys.active

    def make(start: int, stop: int) -> list[JobParts]:
        # random business keys (32 hex digits, as for one job), from one call for the slice
        noise = os.urandom(16 * (stop - start)).hex()
        made = []
        due = base.due_at
        for i in range(start, stop):
            args_obj, args_json = dump_args(args_list[i], max_payload_bytes)
            if check is not None and not keyed:  # a keyed job is checked once it has its keys
                check(args_obj, i + 1, count)
            at = 32 * (i - start)
            made.append(
                (
                    args_obj,
                    args_json,
                    due if dues is None else dues[i],
                    prefix + noise[at : at + 32],
                )
            )
        return made

    if late is None and not keyed:
        return NewJobs(base, count, make)
    # jobs with keys go one by one (store/sql/jobs.py), and jobs with their own deadlines
    # cannot share the template's: a NewJob each, made at once
    jobs = []
    for i in range(count):  # each made, keyed and checked before the next, as NewJobs does
        ((args_obj, args_json, due_at, business_key),) = make(i, i + 1)
        job = variant(
            base,
            args=args_obj,
            args_json=args_json,
            due_at=due_at,
            deadline_at=(
                base.deadline_at
                if late is None or dues is None
                else late_deadline(due_at, base.deadline_at, late)
            ),
            business_key=business_key,
        )
        if keys is not None and now is not None:
            job = keys.keyed(job, now)
        if check is not None and keyed:
            check(job.args, i + 1, count)
        jobs.append(job)
    return jobs

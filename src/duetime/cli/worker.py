"""`duetime worker`: run a worker process that executes due jobs until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import time
from datetime import timedelta
from typing import Any

from duetime import logs
from duetime.cli.support import (
    _positive_int,
    add_clock_warning_flag,
    add_log_flags,
    add_loop_flag,
    make_app,
    port,
    seconds,
)
from duetime.client import App
from duetime.core.errors import InvalidRequest, StoreUnavailable
from duetime.core.flow.share import check_share

log = logging.getLogger("duetime.cli")


def add_parsers(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("worker", parents=parents, help="run a worker that executes due jobs")
    p.add_argument("--app", required=True, help="module:attribute of your duetime.App")
    add_worker_flags(p)
    p.set_defaults(func=cmd_worker)


def add_worker_flags(p: argparse.ArgumentParser) -> None:
    """The flags of `duetime worker` but --app and the common ones (--database-url, --tenant):
    also those of Django's `manage.py duetime_worker` (duetime.django)."""
    p.add_argument(
        "--queues", nargs="+", metavar="QUEUE", help="queues to take jobs from (default: all)"
    )
    p.add_argument(
        "--concurrency", type=_positive_int, default=10, help="jobs run at once (default 10)"
    )
    p.add_argument(
        "--priority-share",
        type=_fraction,
        default=None,
        metavar="FRACTION",
        help="under saturation each lower priority class keeps at least this share of this "
        "worker's slots (default: the App's priority_share, 0.1; 0 for strict priority order)",
    )
    p.add_argument(
        "--poll-interval", type=seconds, default=0.5, help="idle poll interval, e.g. 0.5s"
    )
    p.add_argument(
        "--grace", type=seconds, default=30.0, help="shutdown grace period (default 30s)"
    )
    p.add_argument(
        "--reap-interval", type=seconds, default=5.0, help="how often to reap lapsed leases (5s)"
    )
    p.add_argument(
        "--plan-interval", type=seconds, default=1.0, help="how often to plan schedules (1s)"
    )
    p.add_argument("--no-planner", action="store_true", help="do not plan schedules here")
    p.add_argument(
        "--retention",
        type=_retention,
        default=timedelta(days=7),
        metavar="DURATION|off",
        help="delete succeeded, cancelled and expired jobs this long after they finished "
        "(default 7d; 'off' keeps them; dead letters are always kept)",
    )
    p.add_argument(
        "--metrics-port",
        type=port,
        metavar="PORT",
        help="serve this worker's Prometheus metrics on this port (default: not served)",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address to serve metrics on (default 127.0.0.1; 0.0.0.0 for every interface)",
    )
    p.add_argument(
        "--broker-url",
        default=os.environ.get("DUETIME_BROKER_URL"),
        metavar="URL",
        help="take the jobs of outbox-mode queues from this RabbitMQ, e.g. "
        "amqp://guest:guest@127.0.0.1:5672/ (default: $DUETIME_BROKER_URL; without one, "
        "outbox-mode queues are left to broker-fed workers)",
    )
    p.add_argument(
        "--relay",
        action="store_true",
        help="also run the relay here (as `duetime relay` does; needs --broker-url)",
    )
    p.add_argument(
        "--no-gc-tuning",
        action="store_true",
        help="leave Python's garbage collector as the app set it (default: after the start, "
        "freeze what it made and collect every 10,000 allocations; docs/workers.md)",
    )
    add_clock_warning_flag(p)
    add_loop_flag(p)
    add_log_flags(p)


# the collector's thresholds as the interpreter set them, before the app was imported
_INTERPRETER_GC_THRESHOLD = gc.get_threshold()


def tune_gc() -> None:
    """What the start made (modules, classes, the app) lives as long as the process: kept out
    of the collector's full passes, which otherwise walk all of it every few seconds under load
    and find nothing; and the young passes come every 10,000 allocations, not 700, so that a
    claimed job's records (freed by reference count once it ends) are not walked by older
    passes again and again while they wait ready (docs/performance.md, "A drain profiled").
    Thresholds the app set itself are kept; `--no-gc-tuning` skips all of it (docs/workers.md)."""
    gc.collect()
    gc.freeze()
    if gc.get_threshold() == _INTERPRETER_GC_THRESHOLD:
        gc.set_threshold(10_000, 10, 10)


def _fraction(text: str) -> float:
    try:
        return check_share(float(text))
    except (ValueError, InvalidRequest):
        raise argparse.ArgumentTypeError(
            f"must be a fraction from 0 up to (not including) 1, like 0.1, not {text!r}"
        ) from None


def _retention(text: str) -> timedelta | None:
    if text.strip().lower() == "off":
        return None
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive duration like 7d, or 'off'")
    return timedelta(seconds=value)


def cmd_worker(args: argparse.Namespace, app: App | None = None) -> int:
    """Run a worker of --app's App, or of `app` when given (Django's duetime_worker)."""
    from duetime.runtime import metrics as worker_metrics
    from duetime.runtime.node import event_loop_factory
    from duetime.runtime.worker import Worker, default_worker_id

    event_loop_factory(args.loop)  # --loop uvloop where it is not installed fails now
    # a stop request before the worker runs ends the process cleanly: nothing is claimed yet
    # (the worker's loop takes SIGTERM over once it runs: runtime.node.run_until_signalled)
    signal.signal(signal.SIGTERM, _stop_before_running)
    if args.relay and not args.broker_url:
        args.usage_error("--relay needs the broker: --broker-url URL or DUETIME_BROKER_URL")
    if args.broker_url:
        from duetime.runtime.outbox.broker import require

        require()
    logs.configure(args.log_level, args.log_format)
    if app is None:
        app = make_app(args, create=True, long_running=True)
    if args.priority_share is not None:
        app.priority_share = args.priority_share
    figures = worker_metrics.WorkerMetrics()
    exporter = None  # nothing listens without --metrics-port
    if args.metrics_port is not None:  # before waiting for the store: a busy port fails fast
        exporter = worker_metrics.serve(figures, args.metrics_port, args.metrics_host)
    _wait_for_store(app)
    queues = [q for item in args.queues or [] for q in item.split(",") if q]
    services = []
    calls = None
    if args.relay:
        from duetime.runtime.outbox.relay import relay_services
        from duetime.runtime.service import BlockingCalls

        calls = BlockingCalls(2, name="duetime-relay")
        services = relay_services(
            app.store,
            app.clock,
            calls,
            args.broker_url,
            relay_id=f"relay:{default_worker_id()}",
            metrics=figures,
        )
    worker = Worker(
        app,
        queues=queues or None,
        concurrency=args.concurrency,
        poll_interval=args.poll_interval,
        grace=args.grace,
        reap_interval=args.reap_interval,
        plan_interval=args.plan_interval,
        planner=not args.no_planner,
        retention=args.retention,
        metrics=figures,
        broker_url=args.broker_url or None,
        services=services,
        clock_warning=args.clock_warning,
        loop=args.loop,
    )
    if not args.no_gc_tuning:
        tune_gc()
    worker.serve()  # until SIGTERM or SIGINT; a second signal exits at once with status 1
    # the loop is gone (and with it its handler): a stop request while shutting down is a
    # repeated one, which exits at once, as while the worker runs
    signal.signal(signal.SIGTERM, _stop_at_once)
    if calls is not None:
        calls.close()
    if exporter is not None:
        exporter.stop()
    if worker.abandoned_threads:
        log.warning(
            "%d handler thread(s) outlived the grace period; exiting", worker.abandoned_threads
        )
        logging.shutdown()
        os._exit(0)
    app.close()
    return 0


def _wait_for_store(app: App) -> None:
    """A worker started while its database is down waits for it (a bad URL fails at once),
    doubling its wait up to the cap a service's start has (runtime/node.py)."""
    from duetime.runtime.node import START_RETRY_CAP

    delay = 1.0
    while True:  # a stop request meanwhile ends the process cleanly (_stop_before_running)
        try:
            app.store  # noqa: B018 - opens and checks the store
            return
        except StoreUnavailable as exc:
            log.warning("database unavailable (%s); retrying in %.0fs", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, START_RETRY_CAP)


def _stop_before_running(signum: int, frame: object) -> None:
    """SIGTERM before the worker's loop runs: nothing is claimed yet, so exit with status 0."""
    sys.exit(0)


def _stop_at_once(signum: int, frame: object) -> None:
    """SIGTERM while the worker shuts down: a repeated stop request, which exits at once with
    status 1 (docs/workers.md), as one while the worker runs does."""
    log.warning("second signal: exiting now")
    logging.shutdown()
    os._exit(1)

"""Which tests must never overlap, and the xdist scheduler that keeps them on one process.

Tests that talk to RabbitMQ share one broker (and its queues), and the outbox chaos run stops
and restarts it, so they must never overlap: not on two test processes of one run, nor in two
runs on one machine (they share its RabbitMQ). Each holds a lock file for the machine while it
runs (tests/integration/conftest.py); that alone keeps runs apart, but a test process waiting
on the lock does nothing meanwhile (under --dist load they met often: minutes of waiting in a
`make test`). So under --dist loadgroup they are one work unit, sent whole to one process,
first (the largest unit): the other processes run everything else meanwhile.

xdist's own loadgroup reads the group from a suffix ("@broker") it adds to each item's node id
on the workers, which pytest 9.2 no longer reports (it reads the id from another attribute),
so its groups come out empty; BrokerGroupScheduling finds the group from the node id itself.
"""

from __future__ import annotations

from typing import Any

BROKER_MODULES = frozenset(
    {
        "test_outbox.py",
        "test_outbox_cli.py",
        "test_outbox_flow_procs.py",
        "test_tracing_outbox.py",
    }
)
BROKER_TESTS = frozenset(
    {
        "test_short_outbox_chaos_run_passes_the_history_checker",
        "test_a_relay_cut_off_loses_nothing_and_resumes",
    }
)
BROKER_GROUP = "broker"


def uses_the_broker(module: str, test: str) -> bool:
    """Whether the test `test` (its name without parameters) of the file `module` (its name)
    talks to RabbitMQ."""
    return module in BROKER_MODULES or test in BROKER_TESTS


def group_of(nodeid: str) -> str | None:
    """The group of a test by its node id (path::name[params]), or None."""
    path, _, rest = nodeid.partition("::")
    test = rest.rpartition("::")[2].partition("[")[0]
    return BROKER_GROUP if uses_the_broker(path.rpartition("/")[2], test) else None


def make_scheduler(config: Any, log: Any) -> Any:
    """--dist loadgroup: each test a work unit of its own, but the broker's tests one unit."""
    from xdist.scheduler import LoadGroupScheduling

    class BrokerGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or super()._split_scope(nodeid)

    return BrokerGroupScheduling(config, log)

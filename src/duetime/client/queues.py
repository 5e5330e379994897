"""App's queues: their settings, dispatch mode and flow (docs/outbox.md, docs/flow-control.md)."""

from __future__ import annotations

from duetime.admin import flow
from duetime.client.part import AppPart
from duetime.core.flow.parsers import KEEP, Keep
from duetime.core.flow.records import QueueFlow
from duetime.core.outbox import Dispatch, QueueSettings, dispatch_mode
from duetime.core.requests import check_name
from duetime.twins import async_twin


class Queues(AppPart):
    """Queues: settings shared by every tenant, pause and resume, their flow."""

    def set_queue(
        self,
        name: str,
        *,
        dispatch: Dispatch | str | None = None,
        concurrency: int | Keep | None = KEEP,
        max_backlog: int | Keep | None = KEEP,
        weight: float | None = None,
    ) -> QueueSettings:
        """Change a queue's settings: dispatch="outbox" sends its due jobs through the broker
        (`duetime relay`), "direct" (the default) lets workers claim them from the database.
        concurrency: at most this many of its attempts run at once, cluster-wide;
        max_backlog: an enqueue past this many waiting jobs raises BacklogFull; weight: its
        share of a claim against other queues (docs/flow-control.md). Settings not given are
        kept; concurrency=None or max_backlog=None removes that limit. Queues are shared by
        every tenant."""
        queue = check_name(name, "queue", 100)
        mode = dispatch_mode(str(dispatch)) if dispatch is not None else None
        if mode is not None:
            self.store.set_queue(queue, self.clock.now(), dispatch=mode)
        if mode is None or not (
            isinstance(concurrency, Keep) and isinstance(max_backlog, Keep) and weight is None
        ):
            return flow.set_queue_flow(
                self, queue, concurrency=concurrency, max_backlog=max_backlog, weight=weight
            )
        return self.queue(queue)

    aset_queue = async_twin(set_queue)

    def pause_queue(self, name: str) -> QueueSettings:
        """Start no more jobs of this queue (enqueues are still accepted, running attempts
        finish); every worker's claims hold it from the moment this returns: each claim checks
        the queue's row as it starts jobs (docs/flow-control.md)."""
        return flow.set_queue_flow(self, name, paused=True)

    apause_queue = async_twin(pause_queue)

    def resume_queue(self, name: str) -> QueueSettings:
        """Start the queue's jobs again after pause_queue."""
        return flow.set_queue_flow(self, name, paused=False)

    aresume_queue = async_twin(resume_queue)

    def queue_flows(self) -> list[QueueFlow]:
        """Every queue with settings or waiting/running jobs: settings, backlog, running."""
        return flow.queue_flows(self, None)

    def queue(self, name: str) -> QueueSettings:
        """A queue's settings (the defaults for a queue never set)."""
        found = [q for q in self.store.queue_settings() if q.queue == name]
        return found[0] if found else QueueSettings(name)

    def queues(self) -> list[QueueSettings]:
        """Every queue that has settings or jobs, by name, with its settings."""
        settings = {q.queue: q for q in self.store.queue_settings()}
        for count in self.store.job_counts(None):
            settings.setdefault(count.queue, QueueSettings(count.queue))
        return [settings[name] for name in sorted(settings)]

"""App's view of the outbox (docs/outbox.md)."""

from __future__ import annotations

from duetime.client.part import AppPart
from duetime.core.outbox import OutboxFigures, check_window


class Outbox(AppPart):
    """The outbox's figures."""

    def outbox_status(self, window_seconds: float = 60.0) -> OutboxFigures:
        """The outbox: unpublished events, the oldest one's age, the publish rate over the
        last `window_seconds` (1 s to 1 day)."""
        return self.store.outbox_figures(self.clock.now(), check_window(window_seconds))

"""App's figures: jobs by status and queue, lag and throughput (duetime.admin.figures)."""

from __future__ import annotations

from duetime.admin import figures
from duetime.client.part import AppPart
from duetime.core.stats import Stats
from duetime.twins import async_twin


class Figures(AppPart):
    """The figures of the app's tenant."""

    def stats(self) -> Stats:
        """Jobs by status and queue, oldest overdue age, lag and throughput (5 and 60 min)."""
        return figures.stats(self, self.tenant)

    astats = async_twin(stats)

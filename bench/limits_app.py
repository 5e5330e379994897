"""The app of bench/limits_cost.py: a no-op task without limit keys and one carrying a key."""

from __future__ import annotations

import duetime


def register(app: duetime.App) -> None:
    @app.task(name="cost.free")
    async def free(i: int) -> None:
        pass

    @app.task(name="cost.limited", limits=["dep"])
    async def limited(i: int) -> None:
        pass


app = duetime.App()
register(app)

"""duetime's App and the shop's tasks. Django's views import this module to enqueue; the
worker imports it through shop/worker.py, which sets Django up first."""

from __future__ import annotations

import os

import duetime

# the database Django uses (DATABASES["default"]), where `duetime migrate` made duetime's tables
jobs = duetime.App(os.environ["DUETIME_DATABASE_URL"])


@jobs.task(name="shop.ship_order", max_attempts=8)
def ship_order(order_id: int) -> None:
    # a plain `def`: Django's ORM is synchronous (an `async def` handler would have to wrap
    # every query in sync_to_async). Imported here, once Django is set up.
    from django.db import close_old_connections

    from shop.models import Order

    close_old_connections()  # as Django does around each request
    try:
        Order.objects.filter(pk=order_id).update(shipped=True)
    finally:
        close_old_connections()

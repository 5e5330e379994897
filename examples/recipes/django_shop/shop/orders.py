"""Write an order and enqueue its shipping job: both or neither."""

from __future__ import annotations

from django.db import connection, transaction

from shop.models import Order
from shop.tasks import ship_order


def place_order(customer: str) -> Order:
    """duetime on Django's own PostgreSQL database: the job is inserted in the same
    transaction as the order, so it exists if and only if the order does."""
    with transaction.atomic():
        order = Order.objects.create(customer=customer)
        ship_order.enqueue(
            {"order_id": order.pk},
            key=f"ship-{order.pk}",
            connection=connection.connection,  # the psycopg 3 connection Django is using
        )
    return order


def place_order_on_commit(customer: str) -> Order:
    """duetime on another database (its embedded SQLite, or a PostgreSQL that is not
    Django's): enqueue once Django's transaction has committed."""
    with transaction.atomic():
        order = Order.objects.create(customer=customer)
        transaction.on_commit(
            lambda: ship_order.enqueue({"order_id": order.pk}, key=f"ship-{order.pk}")
        )
    return order

"""Recipe: FastAPI and SQLAlchemy on PostgreSQL. A request's rows and the job it enqueues
commit in one transaction (a rolled-back request leaves neither), and a small deployment runs
its worker inside the web process, started and stopped with the app (its lifespan).

Run it with `uvicorn fastapi_sqlalchemy:api` after `duetime migrate`, DUETIME_DATABASE_URL
naming the PostgreSQL database (docs/fastapi.md). tests/integration/test_recipes.py runs it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy import String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import duetime
from duetime.runtime.worker import Worker

# DUETIME_DATABASE_URL (postgresql://user@host/shop): duetime's tables and the shop's share it
jobs = duetime.App()
# the same database through SQLAlchemy, on the psycopg (3) driver duetime uses
engine = create_engine(re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", jobs.database_url))


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "shop_orders"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(200))
    quantity: Mapped[int]


@jobs.task(name="orders.ship", max_attempts=5)
def ship(order_id: int) -> None:
    print(f"shipping order {order_id}")


@asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    """A worker in the web process, for small deployments: it starts with the app and, when
    the server stops, finishes its running jobs (up to `grace` seconds) before the app ends.
    Larger ones run `duetime worker` processes instead, and leave this out."""
    Base.metadata.create_all(engine)  # the shop's own table (duetime's: `duetime migrate`)
    stop = asyncio.Event()
    worker = Worker(jobs, concurrency=4, grace=10.0)
    running = asyncio.create_task(worker.run(stop))
    try:
        yield
    finally:
        stop.set()
        await running


api = FastAPI(title="shop", lifespan=lifespan)


def session() -> Iterator[Session]:
    with Session(engine) as db:
        yield db


DB = Annotated[Session, Depends(session)]  # a session per request, closed after it


class NewOrder(BaseModel):
    email: str
    quantity: int


STOCK = 10


# a plain `def` route: FastAPI runs it in a thread, where the sync Session and enqueue belong
@api.post("/orders", status_code=201)
def place_order(body: NewOrder, db: DB) -> dict[str, int]:
    with db.begin():  # one transaction: the order and its job commit together, or neither
        order = Order(email=body.email, quantity=body.quantity)
        db.add(order)
        db.flush()  # the order's id, from the database
        job = ship.enqueue({"order_id": order.id}, connection=db)
        if body.quantity > STOCK:  # a refusal after the writes rolls back both
            raise HTTPException(409, f"only {STOCK} in stock")
    return {"order_id": order.id, "job_id": job.id}

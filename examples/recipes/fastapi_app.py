"""Recipe: enqueue from FastAPI routes, and serve duetime's dashboard and API beside them.

Run it with `uvicorn fastapi_app:api` and a worker with `duetime worker --app fastapi_app:jobs`
(docs/recipes/fastapi.md). tests/integration/test_recipes.py runs this file.
"""

from __future__ import annotations

from fastapi import FastAPI
from pydantic import BaseModel

import duetime
from duetime.server import ServerSettings, create_app

# DUETIME_DATABASE_URL, else sqlite:///duetime.db in the working directory
jobs = duetime.App()


@jobs.task(name="orders.confirm", max_attempts=5, timeout="30s")
async def send_confirmation(order_id: int, email: str) -> None:
    ctx = duetime.current()
    # call your mail provider here; give it ctx.business_key so a retry sends no second mail
    print(f"confirming order {order_id} to {email} (key {ctx.business_key})")


api = FastAPI(title="shop")


class Confirm(BaseModel):
    email: str


@api.post("/orders/{order_id}/confirm", status_code=202)
async def confirm(order_id: int, body: Confirm) -> dict[str, int | str]:
    # aenqueue: the async twin, so the event loop does not wait on the database. The key makes
    # a retried request return the same job instead of sending a second confirmation.
    job = await send_confirmation.aenqueue(
        {"order_id": order_id, "email": body.email}, key=f"confirm-{order_id}"
    )
    return {"job_id": job.id, "status": job.status}


# duetime's dashboard (/), REST API (/v1), /metrics and health checks on the same server.
# Mounted last and at the root: the routes above are matched first, everything else goes to
# duetime (its pages link to root paths, so it cannot live under a prefix).
api.mount("/", create_app(jobs, ServerSettings()))

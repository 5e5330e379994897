"""Recipe: enqueue from Flask views.

Run it with `flask --app flask_app run`, a worker with `duetime worker --app flask_app:jobs`,
and the dashboard with `duetime serve --app flask_app:jobs --port 8001` (docs/recipes/flask.md).
tests/integration/test_recipes.py runs this file.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, request

import duetime

# DUETIME_DATABASE_URL, else sqlite:///duetime.db in the working directory
jobs = duetime.App()


@jobs.task(name="reports.build", timeout="10m")
def build_report(month: str, email: str) -> None:
    # build the report and mail it; duetime.current().business_key names this job for dedup
    print(f"building the report of {month} for {email}")


web = Flask(__name__)


@web.post("/reports/<month>")
def request_report(month: str) -> tuple[dict[str, Any], int]:
    email = str((request.get_json(silent=True) or {}).get("email", ""))
    if not email:
        return {"error": 'give the email to send the report to: {"email": ...}'}, 422
    # the key makes a double-clicked button or a retried request return the same job
    job = build_report.enqueue({"month": month, "email": email}, key=f"report-{month}-{email}")
    return {"job_id": job.id, "status": job.status}, 202


@web.get("/reports/jobs/<int:job_id>")
def report_status(job_id: int) -> tuple[dict[str, Any], int]:
    try:
        job = jobs.get_job(job_id)
    except duetime.JobNotFound:
        return {"error": f"no job {job_id}"}, 404
    return {"job_id": job.id, "status": job.status, "attempts": job.attempts}, 200

"""The chaos run: a fault-injection driver, the task app it runs, a history checker, and the
private PostgreSQL cluster it runs on (pgcluster, which the tests use too).

`python -m duetime.chaos.run` (or `make chaos`) starts a private PostgreSQL cluster and
several workers, enqueues a mix of jobs, kills, pauses and restarts things while they run,
then lets everything drain and runs `python -m duetime.chaos.checker` on the result.
See docs/chaos.md.
"""

"""duetime's benchmark harness; see bench/run.py and docs/performance.md."""

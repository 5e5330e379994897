"""Runtime services built on a Store: the worker, its reaper, logging."""

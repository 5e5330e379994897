"""The SQL store: one implementation of the Store contract (store/base.py) over a Driver
(store/driver.py) per dialect, in parts by use case; SQLStore (front.py) is its front."""

from duetime.store.sql.front import SQLStore

__all__ = ["SQLStore"]

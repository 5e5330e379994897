"""Schema version checks shared by every store: refuse a newer schema, ask for migrate."""

from __future__ import annotations

from duetime.core.errors import SchemaError


class SchemaChecks:
    """Mixed into a store that sets `_migrations` and implements `schema_version()`."""

    _migrations: list[tuple[int, str, str]]

    def schema_version(self) -> int:  # pragma: no cover - every store overrides it
        raise NotImplementedError

    @property
    def latest_version(self) -> int:
        return self._migrations[-1][0]

    def _refuse_newer(self, current: int) -> None:
        if current > self.latest_version:
            raise SchemaError(
                f"the database schema is at version {current}, newer than this duetime knows "
                f"({self.latest_version}); upgrade duetime before using this database"
            )

    def check_schema(self) -> None:
        current = self.schema_version()
        self._refuse_newer(current)
        if current < self.latest_version:
            raise SchemaError(
                f"the database schema is at version {current} but this duetime needs "
                f"{self.latest_version}; run `duetime migrate` first"
            )

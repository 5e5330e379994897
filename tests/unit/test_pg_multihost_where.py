"""An error about a multi-host PostgreSQL URL names each host with its own port (issue 23)."""

from __future__ import annotations

import pytest

from duetime.core.errors import StoreUnavailable
from duetime.store import open_store


@pytest.mark.parametrize(
    ("url", "where"),
    [
        (
            "postgresql://postgres@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=read-write",
            "127.0.0.1:1,127.0.0.1:2/db",
        ),
        ("postgresql:///db?host=127.0.0.1,127.0.0.1&port=1", "127.0.0.1:1,127.0.0.1:1/db"),
    ],
)
def test_an_unreachable_multi_host_url_is_named_host_by_host(url: str, where: str) -> None:
    with pytest.raises(StoreUnavailable, match=f"cannot connect to PostgreSQL at {where}:"):
        open_store(url)

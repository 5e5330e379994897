"""duetime's connection defaults merged with a URL's own parameters (no server needed): the
URL's values win, multi-host URLs keep their hosts (docs/stores.md)."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from duetime.core.errors import ConfigurationError
from duetime.store.mysql.driver import CLIENT_DEFAULTS as MYSQL_CLIENT
from duetime.store.mysql.driver import _url_settings
from duetime.store.postgres.driver import CLIENT_DEFAULTS, with_connection_defaults


def test_postgres_defaults_fill_what_the_url_does_not_name() -> None:
    merged = conninfo_to_dict(
        with_connection_defaults(
            "postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write"
        )
    )
    assert merged["host"] == "h1,h2" and merged["port"] == "5432,5433"
    assert merged["target_session_attrs"] == "read-write"
    for name, value in CLIENT_DEFAULTS.items():
        assert merged[name] == value


def test_postgres_url_values_win() -> None:
    url = "postgresql://u@h/db?keepalives=0&tcp_user_timeout=0&options=-c%20statement_timeout%3D5s"
    merged = conninfo_to_dict(with_connection_defaults(url))
    assert merged["keepalives"] == "0" and merged["tcp_user_timeout"] == "0"
    assert merged["options"] == "-c statement_timeout=5s"
    assert merged["keepalives_idle"] == CLIENT_DEFAULTS["keepalives_idle"]


def test_postgres_key_value_strings_work_too() -> None:
    merged = conninfo_to_dict(with_connection_defaults("host=h dbname=db keepalives_idle=60"))
    assert merged["keepalives_idle"] == "60" and merged["keepalives_count"] == "3"


def test_mysql_url_settings() -> None:
    tcp, variables = _url_settings("mysql://u@h/db?keepalives_idle=30&wait_timeout=600")
    assert tcp == {**MYSQL_CLIENT, "keepalives_idle": 30}
    assert variables == {"wait_timeout": 600}
    assert _url_settings("mysql://u@h/db") == (MYSQL_CLIENT, {})


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("ssl=1", "unknown parameter 'ssl'"),
        ("wait_timeout=ten", "whole number"),
        ("wait_timeout=-1", "must not be negative"),
    ],
)
def test_mysql_url_settings_are_checked(query: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        _url_settings(f"mysql://u@h/db?{query}")

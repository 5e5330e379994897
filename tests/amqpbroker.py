"""The RabbitMQ the outbox tests run against: DUETIME_TEST_AMQP_URL, else 127.0.0.1:5672
(guest/guest); where none answers, one started from the installed server (rabbitmq-server);
where none is installed either, the test fails saying so (never a silent skip)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from urllib.parse import urlsplit

import pytest

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"


def answers(url: str, timeout: float = 1.0) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5672), timeout):
            return True
    except OSError:
        return False


def broker_url() -> str:
    url = os.environ.get("DUETIME_TEST_AMQP_URL", DEFAULT_URL)
    if answers(url):
        return url
    if "DUETIME_TEST_AMQP_URL" in os.environ:
        pytest.fail(f"DUETIME_TEST_AMQP_URL={url} does not answer; start that RabbitMQ")
    server = shutil.which("rabbitmq-server") or (
        "/usr/sbin/rabbitmq-server" if os.path.exists("/usr/sbin/rabbitmq-server") else None
    )
    if server is None:
        pytest.fail(
            "no RabbitMQ answers at 127.0.0.1:5672 and none is installed: install one "
            "(apt-get install rabbitmq-server) or set DUETIME_TEST_AMQP_URL"
        )
    subprocess.run([server, "-detached"], check=False, capture_output=True, timeout=60)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if answers(url):
            time.sleep(2)  # the port opens a moment before the broker takes logins
            return url
        time.sleep(0.5)
    pytest.fail(f"started {server}, but nothing answered at {url} within 90 s")


def restore(url: str) -> None:
    """Start the local broker's application again if a test that stops it (the outbox chaos
    run) was killed while it was down; other tests and sessions share this broker."""
    if answers(url):
        return
    ctl = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
    subprocess.run([ctl, "start_app"], check=False, capture_output=True, timeout=120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not answers(url):
        time.sleep(0.5)

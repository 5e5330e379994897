"""A MariaDB/MySQL server for tests: the one configured, the local one, or a private throwaway.

server_url() picks, once per process:
1. DUETIME_TEST_MYSQL_URL, when set (it must answer);
2. mysql://root@127.0.0.1:3306/mysql, when it answers within 3 s
   (skipped when DUETIME_TEST_MYSQL_PRIVATE=1);
3. a private server started from the installed binaries (mariadb-install-db + mariadbd, or
   mysqld --initialize-insecure) in a temporary directory, stopped and deleted at exit.
Otherwise it fails with a message that says what to install or set.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pymysql

LOCAL_URL = "mysql://root@127.0.0.1:3306/mysql"
URL_ENV = "DUETIME_TEST_MYSQL_URL"
PRIVATE_ENV = "DUETIME_TEST_MYSQL_PRIVATE"

_lock = threading.Lock()
_url: str | None = None


def server_url() -> str:
    global _url
    with _lock:
        if _url is None:
            _url = _find_or_start()
        return _url


def reachable(url: str, timeout: int = 3) -> str | None:
    """None when a connection to `url` works, else why it did not."""
    from duetime.store.mysql.driver import _connect_params

    try:
        pymysql.connect(**{**_connect_params(url), "connect_timeout": timeout}).close()
    except Exception as exc:
        return str(exc) or type(exc).__name__
    return None


def _find_or_start() -> str:
    configured = os.environ.get(URL_ENV)
    if configured:
        problem = reachable(configured, timeout=10)
        if problem:
            raise RuntimeError(f"{URL_ENV} is set but MySQL there is not reachable: {problem}")
        return configured
    if os.environ.get(PRIVATE_ENV) != "1":
        problem = reachable(LOCAL_URL)
        if problem is None:
            return LOCAL_URL
    return _start_private()


def _start_private() -> str:
    server = shutil.which("mariadbd") or shutil.which("mysqld") or _sbin("mariadbd", "mysqld")
    installer = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
    if server is None or installer is None:
        raise RuntimeError(
            f"MySQL was not reachable at {LOCAL_URL} and no mariadbd/mariadb-install-db was "
            f"found to start a private one; install MariaDB (apt-get install mariadb-server) "
            f"or set {URL_ENV}=mysql://user:password@host:port/database"
        )
    root = Path(tempfile.mkdtemp(prefix="duetime-mysql-"))
    user: list[str] = []
    if os.geteuid() == 0:
        try:
            account = pwd.getpwnam("mysql")
        except KeyError:
            raise RuntimeError(
                "as root, a private MariaDB needs an OS user named 'mysql'"
            ) from None
        os.chown(root, account.pw_uid, account.pw_gid)
        user = ["--user=mysql"]
    data, sock = root / "data", root / "mysqld.sock"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [installer, f"--datadir={data}", "--auth-root-authentication-method=normal", *user],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"mariadb-install-db failed: {done.stdout[-500:]}{done.stderr[-500:]}")
    log = open(root / "server.log", "w")  # the server writes it until it stops
    process = subprocess.Popen(
        [
            server,
            "--no-defaults",
            f"--datadir={data}",
            f"--socket={sock}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            *user,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )

    def stop() -> None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        shutil.rmtree(root, ignore_errors=True)

    atexit.register(stop)
    url = f"mysql://root@127.0.0.1:{port}/mysql"
    deadline = time.monotonic() + 60
    while (problem := reachable(url, timeout=1)) is not None:
        if process.poll() is not None or time.monotonic() > deadline:
            tail = (root / "server.log").read_text()[-800:]
            raise RuntimeError(f"the private MariaDB did not start ({problem}): {tail}")
        time.sleep(0.2)
    return url


def _sbin(*names: str) -> str | None:
    for name in names:
        path = Path("/usr/sbin") / name
        if path.exists():
            return str(path)
    return None

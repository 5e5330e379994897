"""A private, throwaway PostgreSQL cluster (initdb + pg_ctl), for tests and the chaos run."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class Cluster:
    """initdb/pg_ctl in a temporary directory; as root, run as the `postgres` OS user."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise RuntimeError("no initdb/pg_ctl found (install postgresql)")
        self.bin = bin_dir
        self.prefix: list[str] = []
        self.port = 0
        self.options = ""
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError(
                    "as root, the cluster needs an OS user named 'postgres'"
                ) from None
            os.chown(root, user.pw_uid, user.pw_gid)
            runner = shutil.which("runuser") or shutil.which("sudo")
            if runner is None:
                raise RuntimeError("as root, runuser or sudo is needed to run PostgreSQL")
            self.prefix = [runner, "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        # output to a file, not a pipe: a server started by pg_ctl must not hold our pipe open
        with tempfile.TemporaryFile("w+") as out:
            done = subprocess.run(
                [*self.prefix, *args],
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
                check=False,
            )
            out.seek(0)
            done.stdout = done.stderr = out.read()
        return done

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), *args)

    def start(self) -> None:
        done = self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {(done.stderr or done.stdout).strip()[-2000:]}")
        for _ in range(5):  # the free port may be taken before the server binds it
            self.port = free_port()
            self.options = options = (
                f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c max_connections=200"
            )
            done = self._pg_ctl("-l", str(self.log), "-o", options, "-w", "-t", "60", "start")
            if done.returncode == 0:
                return
            self._pg_ctl("-m", "immediate", "-w", "stop")
        raise RuntimeError(f"could not start PostgreSQL: {self.tail()}")

    def restart(self, down_for: float = 0) -> None:
        """pg_ctl restart -m fast; with down_for, stop (fast), stay down that long, start."""
        if down_for <= 0:
            # -l again: without it the restarted server would log to pg_ctl's stdout
            done = self._pg_ctl("-l", str(self.log), "-m", "fast", "-w", "-t", "60", "restart")
        else:
            done = self._pg_ctl("-m", "fast", "-w", "-t", "60", "stop")
            if done.returncode == 0:
                time.sleep(down_for)
                done = self._pg_ctl(
                    "-l", str(self.log), "-o", self.options, "-w", "-t", "60", "start"
                )
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl restart failed: {done.stdout.strip()} {self.tail()}")

    def down(self) -> None:
        """Stop the server (fast shutdown), keeping its data and port for up()."""
        done = self._pg_ctl("-m", "fast", "-w", "-t", "60", "stop")
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl stop failed: {done.stdout.strip()} {self.tail()}")

    def up(self) -> None:
        """Start the server again after down(), on the same port."""
        done = self._pg_ctl("-l", str(self.log), "-o", self.options, "-w", "-t", "60", "start")
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stdout.strip()} {self.tail()}")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._pg_ctl("-m", "immediate", "-w", "stop")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""


def find_bin_dir() -> Path | None:
    """The directory of initdb and pg_ctl: the newest /usr/lib/postgresql/*/bin, or PATH."""

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(p) for p in Path(path).parent.name.split(".") if p.isdigit())

    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if (Path(directory) / "initdb").exists() and (Path(directory) / "pg_ctl").exists():
            return Path(directory)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(os.path.realpath(initdb)).parent
    return None


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free now: each socket stays bound until all are chosen (ports
    picked one after another, each socket closed at once, can come back the same)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]

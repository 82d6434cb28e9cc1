"""A private PostgreSQL server for the fault suite: ``initdb`` and ``pg_ctl`` in a temporary
directory on a free port, so that a test can restart or stop it (never the machine's shared
server at 127.0.0.1:5432). It runs as the ``postgres`` user when the tests run as root
(``initdb`` refuses root)."""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """One private server: ``start``, ``stop``, ``restart``; ``remove`` stops it and deletes its files."""

    def __init__(self) -> None:
        self.bin = _bindir()
        if self.bin is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
        self.user = "postgres" if os.geteuid() == 0 else None
        # not under pytest's tmp_path: that is root's (0700), and the server runs as postgres
        self.root = Path(tempfile.mkdtemp(prefix="farm-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.root}'\n"
                    "fsync = off\nmax_connections = 50\nshared_buffers = 32MB\n")

    def _run(self, tool: str, *args: str, timeout: float = 120) -> str:
        cmd = [str(self.bin / tool), *args]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.root)
        if r.returncode != 0:
            raise RuntimeError(f"{tool} failed ({r.returncode}): {r.stdout[-1000:]}{r.stderr[-1000:]}")
        return r.stdout

    def start(self) -> None:
        """Start and wait until it accepts connections (``pg_ctl -w``)."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", "-t", "60", "start")

    def stop(self) -> None:
        """Stop now: connected clients are disconnected (``-m fast``); waits until it is down."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def restart(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-m", "fast", "-w", "-t", "60",
                  "restart")

    def running(self) -> bool:
        cmd = [str(self.bin / "pg_ctl"), "-D", str(self.data), "status"]
        return subprocess.run(["runuser", "-u", self.user, "--", *cmd] if self.user else cmd,
                              capture_output=True).returncode == 0

    def url(self, db: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{db}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        try:
            if self.data.exists() and self.running():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "60", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

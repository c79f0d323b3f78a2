"""A throwaway PostgreSQL server on loopback, from Debian's ``postgresql`` package.

The server refuses to run as root, so as root it runs as the ``postgres`` user (``runuser``),
in a temporary directory that user can enter. ``fsync`` is off: the data is thrown away.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from helpers import free_port


class PostgresServer:
    """``with PostgresServer() as server:`` starts it; ``server.url`` is its SQLAlchemy URL."""

    def __init__(self) -> None:
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not binaries:
            raise RuntimeError(
                "PostgreSQL is not installed: apt-get install postgresql (initdb and pg_ctl"
                " under /usr/lib/postgresql/<version>/bin)"
            )
        self.bin = Path(binaries[-1]).parent
        self.root = Path(tempfile.mkdtemp(prefix="social-oauth2-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            self._as_user = ["runuser", "-u", "postgres", "--"]
            user = pwd.getpwnam("postgres")
            self.root.chmod(0o755)
            os.chown(self.root, user.pw_uid, user.pw_gid)

    def _run(self, *command: str) -> None:
        subprocess.run([*self._as_user, *command], check=True, capture_output=True, timeout=120)

    def __enter__(self) -> PostgresServer:
        try:
            self._run(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            )
            options = (
                f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}"
                " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
            )
            self._run(
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.root / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            )
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            self._remove()

    def _remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

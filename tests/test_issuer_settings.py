"""A provider block from an issuer's discovery document: ``social.discover_settings(issuer, ...)``
and ``flask social discover ISSUER``, against real discovery documents on loopback (the local
identity provider, its multi-tenant variant, and the fault server for bad answers)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fault_server import Behaviour, FaultServer
from flask import Flask
from helpers import (
    CLIENT_ID,
    CLIENT_SECRET,
    TENANT_A,
    TENANT_B,
    WELL_KNOWN,
    MakeApp,
    MultiTenantIdentityProvider,
    fake_document,
    free_port,
    run_flask,
    sign_in,
    watch,
)

from flask_social_oauth2 import OAuth2Settings, SocialOAuth2
from flask_social_oauth2.cli import social_cli
from flask_social_oauth2.errors import ConfigurationError, DiscoveryError
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.runtime import current_runtime


def discover(app: Flask, issuer: str, **changes: Any) -> OAuth2Settings:
    social: SocialOAuth2 = current_runtime(app).extension  # type: ignore[assignment]
    arguments: dict[str, Any] = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_url": "/authenticate/local",
        "scope": "openid profile email",
        **changes,
    }
    with app.app_context():
        return social.discover_settings(issuer, **arguments)


# -- social.discover_settings --------------------------------------------------------------------


def test_the_settings_come_from_the_discovery_document(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    admin = make_app()
    settings = discover(admin, idp.issuer)
    assert settings.authorization_url == idp.authorization_url
    assert settings.access_token_url == idp.token_url
    assert settings.api_url == idp.userinfo_url
    assert settings.custom_properties == {"issuer": idp.issuer}
    assert (settings.client_id, settings.client_secret) == (CLIENT_ID, CLIENT_SECRET)
    assert settings.redirect_url == "/authenticate/local"
    assert settings.scope == "openid profile email"
    assert CLIENT_SECRET not in repr(settings)
    assert idp.discovery_requests == 1
    # A provider made of the record signs in, reading the document from the process's cache.
    app = make_app({"local": settings.to_config()})
    outcome = watch(app)
    assert sign_in(app.test_client()).status_code == 302
    assert outcome.infos[0].id_token_claims is not None
    assert idp.discovery_requests == 1


def test_more_custom_properties_and_the_default_scope(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    app = make_app()
    social: SocialOAuth2 = current_runtime(app).extension  # type: ignore[assignment]
    with app.app_context():
        settings = social.discover_settings(
            idp.issuer,
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            redirect_url="https://app.example/authenticate/acme",
            custom_properties={"issuer": "https://ignored.example", "idTokenLeeway": "30"},
        )
    assert settings.scope == "openid email profile"
    assert settings.custom_properties == {"issuer": idp.issuer, "idTokenLeeway": "30"}


@pytest.mark.parametrize("segment", ["common", "organizations"])
def test_a_multi_tenant_issuer_with_its_allowed_tenants(
    make_app: MakeApp, multi_tenant_idp: MultiTenantIdentityProvider, segment: str
) -> None:
    """The issuer of a tenant segment finds the document whose issuer holds ``{tenantid}``."""
    issuer = multi_tenant_idp.issuer_of(segment)
    settings = discover(
        make_app(),
        issuer,
        redirect_url="/authenticate/entra",
        custom_properties={"allowedTenants": TENANT_B},
    )
    assert settings.custom_properties == {"issuer": issuer, "allowedTenants": TENANT_B}
    app = make_app({"entra": settings.to_config()})
    outcome = watch(app)
    assert sign_in(app.test_client(), "entra").status_code == 403
    multi_tenant_idp.tenant = TENANT_B
    assert sign_in(app.test_client(), "entra").status_code == 302
    assert len(outcome.infos) == 1


@pytest.mark.parametrize(
    ("issuer", "message"),
    [
        ("http://id.example", "must use https"),
        ("https://id.example/?tenant=1", "must not contain a query"),
        ("https://id.example/#x", "must not contain a fragment"),
        ("id.example", ""),
        ("https://[id.example", ""),  # not even a URL: the error names the block "issuer"
    ],
)
def test_an_issuer_that_is_no_issuer_is_a_configuration_error(
    make_app: MakeApp, issuer: str, message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        discover(make_app(), issuer)
    (problem,) = raised.value.problems
    assert problem.key == "issuer"
    assert message in problem.message
    assert problem.provider is not None


def test_a_bad_value_given_is_listed(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    with pytest.raises(ConfigurationError) as raised:
        discover(make_app(), idp.issuer, client_id="", redirect_url="no-path", name="acme")
    assert {(p.provider, p.key) for p in raised.value.problems} == {
        ("acme", "clientID"),
        ("acme", "redirectURL"),
    }


def test_an_unreachable_issuer(make_app: MakeApp) -> None:
    issuer = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(DiscoveryError) as raised:
        discover(make_app(), issuer, name="acme")
    assert raised.value.status_code == 502
    assert str(raised.value).startswith("provider 'acme': discovery request")


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ({WELL_KNOWN: Behaviour.html("<h1>Welcome</h1>")}, "answered no JSON"),
        ({WELL_KNOWN: Behaviour.json(["issuer"])}, "is not a JSON object"),
        ({}, "HTTP 404"),
        ({WELL_KNOWN: Behaviour.json({"token_endpoint": "https://id.example/t"})}, "no issuer"),
        ("other issuer", "names another issuer than the configured one: 'https://other.example'"),
        ("trailing slash", "the configured one: 'http://127.0.0.1:"),
        ("no token endpoint", "has no token_endpoint"),
        ("no endpoints", "has no authorization_endpoint and no token_endpoint and no jwks_uri"),
        ("http endpoint", "is not an https address"),
    ],
)
def test_what_is_not_a_discovery_document(
    make_app: MakeApp, fault_server: FaultServer, answers: Any, message: str
) -> None:
    issuer = fault_server.url
    documents = {
        "other issuer": fake_document("https://other.example"),
        "trailing slash": fake_document(f"{issuer}/"),
        "no token endpoint": fake_document(issuer, token_endpoint=None),
        "no endpoints": {"issuer": issuer},
        "http endpoint": fake_document(issuer, authorization_endpoint="http://id.example/a"),
    }
    served = (
        {WELL_KNOWN: Behaviour.json(documents[answers])} if isinstance(answers, str) else answers
    )
    for path, behaviour in served.items():
        fault_server.set(path, behaviour)
    with pytest.raises(DiscoveryError) as raised:
        discover(make_app(), issuer)
    assert message in str(raised.value)
    assert raised.value.status_code == 502
    if answers == "trailing slash":
        assert str(raised.value).endswith("/' (they differ by a trailing '/')")


def test_a_document_without_keys_serves_a_scope_without_openid(
    make_app: MakeApp, fault_server: FaultServer
) -> None:
    fault_server.set(WELL_KNOWN, Behaviour.json(fake_document(fault_server.url, jwks_uri=None)))
    with pytest.raises(DiscoveryError, match="no jwks_uri"):
        discover(make_app(), fault_server.url)
    settings = discover(make_app(), fault_server.url, scope="email")
    assert settings.access_token_url == f"{fault_server.url}/token"


def test_the_app_timeout_and_size_cap_apply(make_app: MakeApp, fault_server: FaultServer) -> None:
    fault_server.set(WELL_KNOWN, Behaviour.hang())
    app = make_app(SOCIAL_OAUTH2_TIMEOUT=1, SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL=0)
    started = time.monotonic()
    with pytest.raises(DiscoveryError) as raised:
        discover(app, fault_server.url)
    assert raised.value.status_code == 504
    assert time.monotonic() - started < 3
    fault_server.set(WELL_KNOWN, Behaviour.huge(10 * 1024 * 1024))
    capped = make_app(
        SOCIAL_OAUTH2_MAX_RESPONSE_BYTES=64 * 1024, SOCIAL_OAUTH2_DISCOVERY_FAILURE_TTL=0
    )
    with pytest.raises(DiscoveryError) as raised:
        discover(capped, fault_server.url)
    assert raised.value.status_code == 502


# -- flask social discover -----------------------------------------------------------------------


def load_back(
    make_app: MakeApp, tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch
) -> OAuth2Settings:
    """The block of ``text`` read by the YAML config reader, as an app would."""
    path = tmp_path / "providers.yaml"
    path.write_text(text + "\n", encoding="utf-8")
    monkeypatch.setenv("ACME_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("ACME_CLIENT_SECRET", CLIENT_SECRET)
    app = make_app(None, SOCIAL_OAUTH2_PROVIDERS_FILE=str(path))
    (provider,) = current_runtime(app).providers.values()
    assert provider.name == "acme"
    return provider.settings


def test_discover_prints_a_block_that_loads_back_unchanged(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = make_app()
    result = app.test_cli_runner().invoke(social_cli, ["discover", idp.issuer, "--name", "acme"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:6] == [
        "acme:",
        f"  authorizationURL: {idp.authorization_url}",
        f"  accessTokenURL: {idp.token_url}",
        "  redirectURL: /authenticate/acme",
        f"  apiURL: {idp.userinfo_url}",
        "  clientID: ${ACME_CLIENT_ID}",
    ]
    assert "  clientSecret: ${ACME_CLIENT_SECRET}" in result.stdout
    assert result.stderr == "# set ACME_CLIENT_ID and ACME_CLIENT_SECRET in the environment\n"
    loaded = load_back(make_app, tmp_path, result.stdout, monkeypatch)
    expected = discover(
        app, idp.issuer, redirect_url="/authenticate/acme", scope="openid email profile"
    )
    assert loaded == expected


def test_discover_with_a_client_id_a_scope_and_a_multi_tenant_issuer(
    make_app: MakeApp,
    multi_tenant_idp: MultiTenantIdentityProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    issuer = multi_tenant_idp.issuer_of("organizations")
    app = make_app()
    arguments = ["discover", issuer, "--name", "acme", "--client-id", "0123", "--scope", "openid"]
    result = app.test_cli_runner().invoke(social_cli, arguments)
    assert result.exit_code == 0, result.output
    assert '  clientID: "0123"' in result.stdout
    assert "    # allowedTenants: <the tenant ids" in result.stdout
    assert result.stderr == "# set ACME_CLIENT_SECRET in the environment\n"
    loaded = load_back(make_app, tmp_path, result.stdout, monkeypatch)
    assert loaded.client_id == "0123"
    assert loaded.scope == "openid"
    assert loaded.custom_properties == {"issuer": issuer}
    assert TENANT_A not in result.stdout


def test_discover_names_the_block_after_the_issuers_host(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = make_app().test_cli_runner().invoke(social_cli, ["discover", idp.issuer])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith('"127-0-0-1":\n  ')  # quoted: it looks like a number
    assert "  redirectURL: /authenticate/127-0-0-1\n" in result.stdout
    assert "  clientSecret: ${_127_0_0_1_CLIENT_SECRET}\n" in result.stdout
    monkeypatch.setenv("_127_0_0_1_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("_127_0_0_1_CLIENT_SECRET", CLIENT_SECRET)
    path = tmp_path / "providers.yaml"
    path.write_text(result.stdout, encoding="utf-8")
    app = make_app(None, SOCIAL_OAUTH2_PROVIDERS_FILE=str(path))
    assert list(current_runtime(app).providers) == ["127-0-0-1"]


@pytest.mark.parametrize(
    ("issuer", "message"),
    [
        ("http://id.example", "key 'issuer': must use https"),
        ("unreachable", "failed: ConnectionError"),
    ],
)
def test_discover_fails_with_one_line(make_app: MakeApp, issuer: str, message: str) -> None:
    if issuer == "unreachable":
        issuer = f"http://127.0.0.1:{free_port()}"
    result = make_app().test_cli_runner().invoke(social_cli, ["discover", issuer, "--name", "x"])
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: provider 'x'")
    assert message in line


def test_discover_refuses_a_bad_name(make_app: MakeApp) -> None:
    result = (
        make_app()
        .test_cli_runner()
        .invoke(social_cli, ["discover", "https://id.example", "--name", "Acme/../x"])
    )
    assert result.exit_code == 2
    assert "is not a block name" in result.stderr


DISCOVER_APP = """\
from flask import Flask

from flask_social_oauth2 import SocialOAuth2

app = Flask(__name__)
app.config.update(SECRET_KEY="k", SOCIAL_OAUTH2_PROVIDERS={})
SocialOAuth2(app)
"""


def flask_command(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``flask --app app.py social ARGS`` in a real process, as a user runs it."""
    (tmp_path / "app.py").write_text(DISCOVER_APP, encoding="utf-8")
    return run_flask(tmp_path, "--app", "app.py", "social", *args)


def test_the_flask_command(
    make_app: MakeApp,
    idp: LocalIdentityProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    done = flask_command(tmp_path, "discover", idp.issuer, "--name", "acme")
    assert done.returncode == 0, done.stderr
    loaded = load_back(make_app, tmp_path, done.stdout, monkeypatch)
    assert loaded.access_token_url == idp.token_url
    assert loaded.client_secret == CLIENT_SECRET
    failed = flask_command(tmp_path, "discover", "http://id.example", "--name", "acme")
    assert failed.returncode == 1
    assert failed.stdout == ""
    assert failed.stderr.splitlines() == [
        "error: provider 'acme', key 'issuer': must use https (plain http is accepted only for"
        " loopback hosts)"
    ]

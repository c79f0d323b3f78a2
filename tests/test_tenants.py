"""Tenant allow-lists for multi-tenant issuers (``customProperties.allowedTenants``), against a
real OpenID Connect server on loopback whose discovery issuer holds ``{tenantid}`` (SECURITY.md
41: a multi-tenant block's list is enforced on the verified ID token's ``tid``)."""

from __future__ import annotations

import contextlib
import sqlite3
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
    fake_app,
    fake_document,
    idp_block,
    multi_tenant_block,
    sign_in,
    signed,
    watch,
)

from flask_social_oauth2 import OAuth2Info
from flask_social_oauth2.checks import check_configuration
from flask_social_oauth2.errors import AccessDeniedError, ConfigurationError, IdTokenError
from flask_social_oauth2.local_idp import LocalIdentityProvider
from flask_social_oauth2.runtime import current_runtime


def entra_app(
    make_app: MakeApp, server: MultiTenantIdentityProvider, tmp_path: Path, **custom: str
) -> Flask:
    """An app with the block ``entra`` on ``server``'s ``common`` endpoint, keeping tokens and
    identities in a SQL store (SQLite), so that the test can see what a sign-in kept."""
    return make_app(
        {"entra": multi_tenant_block(server, **custom)},
        SOCIAL_OAUTH2_TOKEN_STORE=f"sqlite:///{tmp_path / 'tokens.sqlite3'}",
    )


def rows_kept(path: Path, *, besides: tuple[str, ...] = ()) -> int:
    """The rows of every table of the SQLite file ``path`` but ``besides`` (none when it was
    never made)."""
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = [
            name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return sum(
            db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]  # noqa: S608 - own tables
            for name in tables
            if name not in besides
        )


def kept_identity(app: Flask, key: str) -> Any:
    store: Any = current_runtime(app).token_store
    with app.app_context():
        return store.identity("entra", key), store.load("entra", key)


@pytest.mark.parametrize(
    "allowed",
    [f"{TENANT_B} {TENANT_A}", TENANT_A.upper(), "*", None],
    ids=["listed", "listed-upper-case", "any", "no-list"],
)
def test_a_listed_tenant_signs_in(
    make_app: MakeApp,
    multi_tenant_idp: MultiTenantIdentityProvider,
    tmp_path: Path,
    allowed: str | None,
) -> None:
    custom = {} if allowed is None else {"allowedTenants": allowed}
    app = entra_app(make_app, multi_tenant_idp, tmp_path, **custom)
    outcome = watch(app)
    client = app.test_client()
    assert sign_in(client, "entra").status_code == 302
    (info,) = outcome.infos
    assert info.id_token_claims is not None
    assert info.id_token_claims["tid"] == TENANT_A
    assert info.id_token_claims["iss"] == multi_tenant_idp.issuer_of(TENANT_A)
    identity, token = kept_identity(app, outcome.profiles[0].provider_key)
    assert identity is not None
    assert token is not None
    # the identity's tokens; the session index has its sign-in too (SQL stores keep both)
    assert rows_kept(tmp_path / "tokens.sqlite3", besides=("social_oauth2_sessions",)) == 1


@pytest.mark.parametrize("allowed", [TENANT_B, f"{TENANT_B} another-tenant"])
def test_s41_a_tenant_outside_the_list_is_403_and_nothing_is_kept(
    make_app: MakeApp,
    multi_tenant_idp: MultiTenantIdentityProvider,
    tmp_path: Path,
    allowed: str,
) -> None:
    app = entra_app(make_app, multi_tenant_idp, tmp_path, allowedTenants=allowed)
    outcome = watch(app)
    client = app.test_client()
    response = sign_in(client, "entra")
    assert response.status_code == 403
    assert "cannot sign in here" in response.text
    assert outcome.infos == []  # on_authenticated was not called
    error = outcome.error
    assert isinstance(error, AccessDeniedError)
    assert TENANT_A not in str(error)
    # The token was verified (so the refusal is about the tenant, not a forged token) ...
    assert len(multi_tenant_idp.token_requests) == 1
    # ... and nothing of the sign-in was kept: no profile fetched, no identity, no token, no
    # identity in the browser's session.
    assert multi_tenant_idp.userinfo_requests == []
    assert rows_kept(tmp_path / "tokens.sqlite3") == 0
    with client.session_transaction() as session:
        assert dict(session) == {}


def test_the_tenant_that_signs_in_is_the_verified_tokens(
    make_app: MakeApp, multi_tenant_idp: MultiTenantIdentityProvider, tmp_path: Path
) -> None:
    """An ID token whose ``iss`` names a listed tenant but whose ``tid`` does not is not
    verified at all (the issuer template is filled with the token's own ``tid``)."""
    app = entra_app(make_app, multi_tenant_idp, tmp_path, allowedTenants=TENANT_A)
    outcome = watch(app)

    def mixed(header: dict[str, Any], claims: dict[str, Any]) -> Any:
        return header, {**claims, "tid": TENANT_B, "iss": multi_tenant_idp.issuer_of(TENANT_A)}

    multi_tenant_idp.id_token_tamper = mixed
    assert sign_in(app.test_client(), "entra").status_code == 502
    assert isinstance(outcome.error, IdTokenError)
    assert outcome.infos == []


def test_the_tenant_is_checked_again_on_the_next_sign_in(
    make_app: MakeApp, multi_tenant_idp: MultiTenantIdentityProvider, tmp_path: Path
) -> None:
    """Two organisations through the same block: each sign-in's own ``tid`` decides."""
    app = entra_app(make_app, multi_tenant_idp, tmp_path, allowedTenants=TENANT_A)
    outcome = watch(app)
    assert sign_in(app.test_client(), "entra").status_code == 302
    multi_tenant_idp.tenant = TENANT_B
    assert sign_in(app.test_client(), "entra").status_code == 403
    assert len(outcome.infos) == 1
    assert isinstance(outcome.error, AccessDeniedError)


def test_a_token_without_tid_is_refused_when_a_list_is_set(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    """A single-tenant issuer whose ID tokens carry no ``tid``: with a list (not ``*``) no
    one signs in, rather than everyone."""
    block = idp_block(
        idp,
        scope="openid profile email",
        customProperties={"issuer": idp.issuer, "allowedTenants": TENANT_A},
    )
    app = make_app({"local": block})
    outcome = watch(app)
    assert sign_in(app.test_client()).status_code == 403
    assert "has no tid" in str(outcome.error)


def test_the_builtin_microsoft_provider_checks_the_list(
    make_app: MakeApp, multi_tenant_idp: MultiTenantIdentityProvider
) -> None:
    """The ``microsoft`` class on a multi-tenant issuer (its profile from the userinfo)."""
    block = multi_tenant_block(multi_tenant_idp, "organizations", allowedTenants=TENANT_B)
    block["apiURL"] = multi_tenant_idp.userinfo_url
    app = make_app({"entra": block}, SOCIAL_OAUTH2_PROVIDER_CLASSES={"entra": "microsoft"})
    assert type(current_runtime(app).providers["entra"]).__name__ == "MicrosoftProvider"
    outcome = watch(app)
    assert sign_in(app.test_client(), "entra").status_code == 403
    multi_tenant_idp.tenant = TENANT_B
    assert sign_in(app.test_client(), "entra").status_code == 302
    assert outcome.infos[0].id_token_claims is not None
    assert outcome.infos[0].id_token_claims["tid"] == TENANT_B


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"allowedTenants": ""}, "must list tenant ids"),
        ({"allowedTenants": "   "}, "must list tenant ids"),
        ({"allowedTenants": f"* {TENANT_A}"}, "not both"),
        ({"allowedTenants": "acme/../x"}, "'acme/../x'"),
        ({"allowedTenants": "-dash"}, "'-dash'"),
        ({"allowedTenants": TENANT_A, "scope": "profile email"}, "verified ID tokens"),
    ],
)
def test_a_bad_list_is_refused_at_setup(
    make_app: MakeApp, changes: dict[str, str], message: str
) -> None:
    scope = changes.pop("scope", "openid profile email")
    block = {
        "accessTokenURL": "https://login.microsoftonline.com/common/oauth2/v2.0/token",
        "redirectURL": "/authenticate/microsoft",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": scope,
        "customProperties": changes,
    }
    with pytest.raises(ConfigurationError) as raised:
        make_app({"microsoft": block})
    (problem,) = raised.value.problems
    assert problem.provider == "microsoft"
    assert problem.key == "customProperties.allowedTenants"
    assert message in problem.message


def microsoft_block(tenant: str, **custom: str) -> dict[str, Any]:
    block: dict[str, Any] = {
        "authorizationURL": f"https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize",
        "accessTokenURL": f"https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token",
        "redirectURL": "/authenticate/microsoft",
        "clientID": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "scope": "openid profile email User.Read",
    }
    if custom:
        block["customProperties"] = custom
    return block


@pytest.mark.parametrize(
    ("name", "block", "warned"),
    [
        ("microsoft", microsoft_block("common"), "'common'"),
        ("azure", microsoft_block("organizations"), "'organizations'"),
        ("microsoft", microsoft_block("consumers"), "'consumers'"),
        ("microsoft", {**microsoft_block("common"), "scope": "User.Read"}, "with 'openid'"),
        (
            "corp",
            {
                **microsoft_block("common"),
                "customProperties": {"issuer": "https://login.microsoftonline.com/common/v2.0"},
            },
            "'common'",
        ),
        ("microsoft", microsoft_block("common", allowedTenants=TENANT_A), None),
        ("microsoft", microsoft_block("common", allowedTenants="*"), None),
        ("microsoft", microsoft_block(TENANT_A), None),
        ("microsoft", microsoft_block("contoso.onmicrosoft.com"), None),
    ],
)
def test_check_warns_about_a_multi_tenant_block_without_a_list(
    make_app: MakeApp,
    name: str,
    block: dict[str, Any],
    warned: str | None,
    captured_logs: list[Any],
) -> None:
    app = make_app({name: {**block, "redirectURL": f"/authenticate/{name}"}})
    report = check_configuration(app)  # fetches nothing: no server answers these addresses
    found = [text for text in report.warnings if "allowedTenants" in text]
    if warned is None:
        assert found == []
        return
    (warning,) = found
    assert f"provider {name!r}" in warning
    assert warned in warning
    assert report.errors == []
    # The same warning through the command, which exits 0 but 1 with --strict.
    from flask_social_oauth2.cli import social_cli

    runner = app.test_cli_runner()
    result = runner.invoke(social_cli, ["check"])
    assert result.exit_code == 0, result.output
    assert "allowedTenants" in result.output
    assert runner.invoke(social_cli, ["check", "--strict"]).exit_code == 1


def test_the_list_is_read_in_one_place() -> None:
    from flask_social_oauth2 import OAuth2Settings
    from flask_social_oauth2.config.provider_options import read_provider_options

    def allowed_tenants(settings: OAuth2Settings) -> frozenset[str] | None:
        options, problems = read_provider_options(settings)
        assert not problems
        return options.allowed_tenants

    settings = OAuth2Settings(
        access_token_url="https://id.example/token",
        redirect_url="/authenticate/x",
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
    )
    assert allowed_tenants(settings) is None
    listed = settings.replace(custom_properties={"allowedTenants": f" {TENANT_A.upper()}  b "})
    assert allowed_tenants(listed) == frozenset({TENANT_A, "b"})


@pytest.mark.parametrize(("tenant", "refused"), [(TENANT_A, False), (TENANT_B, True)])
def test_a_refreshed_id_token_is_checked_too(
    make_app: MakeApp,
    fault_server: FaultServer,
    rsa_key: Any,
    tenant: str,
    refused: bool,
) -> None:
    """A refresh answer with an ID token (Entra sends one): a tenant taken off the list after
    the sign-in cannot refresh. The multi-tenant provider is played by the fault server,
    with hand-signed tokens, since the local identity provider's refresh answers have none."""
    common = f"{fault_server.url}/common/v2.0"
    template = f"{fault_server.url}/{{tenantid}}/v2.0"
    document = fake_document(template, jwks_uri=f"{fault_server.url}/jwks")
    fault_server.set(f"/common/v2.0{WELL_KNOWN}", Behaviour.json(document))
    fault_server.set("/jwks", Behaviour.json({"keys": [rsa_key.as_dict(private=False)]}))
    now = int(time.time())
    claims = {
        "iss": template.replace("{tenantid}", tenant),
        "tid": tenant,
        "sub": "user-1",
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 300,
    }
    answer = {
        "access_token": "new-access",
        "token_type": "Bearer",
        "id_token": signed(rsa_key, "RS256", claims),
    }
    fault_server.set("/token", Behaviour.json(answer))
    properties = {"issuer": common, "allowedTenants": TENANT_A}
    app = fake_app(make_app, fault_server, customProperties=properties)
    info = OAuth2Info(
        access_token="old-access", refresh_token="refresh", id_token_claims={"sub": "user-1"}
    )
    with app.app_context():
        provider: Any = current_runtime(app).providers["fake"]
        if refused:
            with pytest.raises(AccessDeniedError):
                provider.refresh(info)
        else:
            assert provider.refresh(info).id_token_claims["tid"] == TENANT_A

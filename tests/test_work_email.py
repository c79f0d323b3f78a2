"""Home realm discovery: a work e-mail address finds its provider by domain
(``customProperties.domains``, else the app's domain loader), and the sign-in starts there with
``login_hint``."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask, request
from helpers import MakeApp, block_for, idp_block, query_of, sign_in, start_flow

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.config.email_domains import domain_of, normalized_domain
from flask_social_oauth2.errors import ConfigurationError
from flask_social_oauth2.local_idp import LocalIdentityProvider


def two_customers(make_app: MakeApp, **config: Any) -> Flask:
    return make_app(
        {
            "acme": block_for("acme", customProperties={"domains": "acme.test ACME.example."}),
            "globex": block_for("globex", customProperties={"domains": "globex.test"}),
            "github": block_for("github"),
        },
        **config,
    )


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("ana@acme.test", "acme"),
        ("Ana.Lima@ACME.TEST", "acme"),
        ("  ana@acme.example  ", "acme"),
        ("ana@acme.example.", "acme"),
        ('"odd@name"@globex.test', "globex"),
        ("ana@eu.acme.test", None),  # a subdomain is not its parent's
        ("ana@acme.test.evil.example", None),
        ("ana@gmail.com", None),
    ],
)
def test_a_configured_domain_names_its_block(
    make_app: MakeApp, address: str, expected: str | None
) -> None:
    app = two_customers(make_app)
    with app.test_request_context():
        assert app.extensions["social_oauth2"].extension.provider_for_email(address) == expected


@pytest.mark.parametrize(
    "address",
    [
        "",
        "ana",
        "@acme.test",
        "ana@",
        "ana@acme..test",
        "ana @acme.test",
        "ana@-acme.test",
        "a" * 250 + "@acme.test",
        "ana@acme_test.com",
        "ana@acme.test\nbcc@acme.test",
    ],
)
def test_what_is_not_an_address_is_a_value_error_that_does_not_repeat_it(
    make_app: MakeApp, address: str
) -> None:
    app = two_customers(make_app)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with (
        app.test_request_context(),
        pytest.raises(ValueError, match="not an e-mail address") as error,
    ):
        social.provider_for_email(address)
    assert "ana" not in str(error.value)


def test_an_internationalized_domain_matches_its_punycode_form(make_app: MakeApp) -> None:
    app = make_app({"muller": block_for("muller", customProperties={"domains": "müller.test"})})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    with app.test_request_context():
        assert social.provider_for_email("ana@xn--mller-kva.test") == "muller"
        assert social.provider_for_email("ana@MÜLLER.test") == "muller"
    assert normalized_domain("Müller.Test.") == "xn--mller-kva.test"
    assert domain_of("x@Müller.test") == "xn--mller-kva.test"


def test_the_domain_loader_answers_for_domains_no_block_lists(make_app: MakeApp) -> None:
    app = two_customers(make_app)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension
    asked: list[str] = []

    @social.domain_loader
    def tenant_for(domain: str) -> str | None:
        asked.append(domain)
        return {"initech.test": "initech"}.get(domain)

    with app.test_request_context():
        assert social.provider_for_email("bob@Initech.Test") == "initech"
        assert social.provider_for_email("bob@nowhere.test") is None
        assert social.provider_for_email("bob@acme.test") == "acme"  # configured: not asked
    assert asked == ["initech.test", "nowhere.test"]


def test_a_domain_loader_that_answers_something_else_is_named(make_app: MakeApp) -> None:
    app = two_customers(make_app)
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @social.domain_loader
    def broken(domain: str) -> Any:
        return 42

    with app.test_request_context(), pytest.raises(TypeError, match=r"domain loader .*broken"):
        social.provider_for_email("bob@initech.test")


def test_bad_domains_are_refused_at_init_app_every_problem_listed(make_app: MakeApp) -> None:
    with pytest.raises(ConfigurationError) as error:
        make_app(
            {
                "acme": block_for("acme", customProperties={"domains": "acme.test not_a.domain"}),
                "globex": block_for("globex", customProperties={"domains": "ACME.test"}),
                "initech": block_for("initech", customProperties={"domains": "   "}),
            }
        )
    messages = [str(problem) for problem in error.value.problems]
    assert any("'acme'" in m and "not_a.domain" in m and "not a domain name" in m for m in messages)
    assert any("'globex'" in m and "acme.test is already a domain of 'acme'" in m for m in messages)
    assert any("'initech'" in m and "space-separated domain names" in m for m in messages)
    assert all("customProperties.domains" in m for m in messages)
    assert len(messages) == 3


def test_a_work_email_form_signs_in_with_login_hint(
    make_app: MakeApp, idp: LocalIdentityProvider
) -> None:
    """The view DESIGN.md shows: find the provider, start it with the address as login_hint,
    and the sign-in completes against a real identity provider on loopback."""
    app = make_app({"local": idp_block(idp, customProperties={"domains": "acme.test"})})
    social: SocialOAuth2 = app.extensions["social_oauth2"].extension

    @app.post("/work-email")
    def work_email() -> Any:
        address = request.form["email"]
        name = social.provider_for_email(address)
        if name is None:
            return "no sign-in for that domain", 404
        provider = social.provider(name).with_settings(
            lambda s: s.replace(
                authorization_params={**s.authorization_params, "login_hint": address}
            )
        )
        return provider.authenticate()

    client = app.test_client()
    assert client.post("/work-email", data={"email": "ana@gmail.com"}).status_code == 404
    started = client.post("/work-email", data={"email": "ana@acme.test"})
    assert started.status_code == 302
    location = started.headers["Location"]
    assert location.startswith(idp.url)
    assert query_of(location)["login_hint"] == "ana@acme.test"
    finished = sign_in(client, "local")
    assert finished.status_code == 302
    assert "login_hint" not in start_flow(client, "local")  # the configured block is unchanged

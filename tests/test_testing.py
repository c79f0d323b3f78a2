"""flask_social_oauth2.testing: the pytest plugin and the helpers an app's own tests use."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import MakeApp, valid_block
from test_docs_examples import readme_block

import flask_social_oauth2
from flask_social_oauth2 import OAuth2Provider
from flask_social_oauth2.errors import UnknownProviderError
from flask_social_oauth2.local_idp import LocalIdentityProvider, LocalUser
from flask_social_oauth2.testing import local_idp, local_idp_block, sign_in, use_local_idp

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

#: An app's own test module, as a user of the plugin would write it.
APP_TESTS = """
from __future__ import annotations

from flask import Flask, session

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.local_idp import LocalUser
from flask_social_oauth2.testing import local_idp_block, sign_in, use_local_idp

ADA = LocalUser(sub="ada-1815", name="Ada Lovelace", email="ada@example.test",
                given_name="Ada", family_name="Lovelace", picture="https://img.test/ada.png")


def create_app(providers: dict) -> Flask:
    app = Flask("my_app")
    app.config.update(SECRET_KEY="test", TRUSTED_HOSTS=["localhost"],
                      SOCIAL_OAUTH2_PROVIDERS=providers)

    @app.get("/me")
    def me() -> dict:
        return session.get("social_profile") or {}

    SocialOAuth2(app)
    return app


GITHUB = {
    "authorizationURL": "https://github.com/login/oauth/authorize",
    "accessTokenURL": "https://github.com/login/oauth/access_token",
    "redirectURL": "/authenticate/github",
    "clientID": "real-id",
    "clientSecret": "real-secret",
    "scope": "read:user user:email",
}


def test_sign_in_through_the_real_github_block(social_idp):
    app = create_app({"github": GITHUB})
    use_local_idp(app, "github", social_idp)
    client = app.test_client()
    response = sign_in(client, "github", ADA, next="/me")
    assert response.status_code == 302
    assert response.headers["Location"] == "/me"
    profile = client.get("/me").get_json()
    assert profile["provider_id"] == "github"
    assert profile["provider_key"] == "ada-1815"
    assert profile["full_name"] == "Ada Lovelace"
    assert profile["avatar_url"] == "https://img.test/ada.png"


def test_a_block_for_the_local_provider(social_idp):
    app = create_app({"local": local_idp_block(social_idp)})
    client = app.test_client()
    sign_in(client, "local", follow_redirects=True)
    assert client.get("/me").get_json()["email"] == "test.user@example.test"


def test_access_denied(social_idp):
    app = create_app({"local": local_idp_block(social_idp)})
    response = sign_in(app.test_client(), "local", deny="access_denied")
    assert response.status_code == 403


def test_bad_token(social_idp):
    app = create_app({"local": local_idp_block(social_idp)})
    client = app.test_client()
    response = sign_in(client, "local", ADA, token_failure="invalid_grant")
    assert response.status_code == 502
    assert client.get("/me").get_json() == {}
    assert sign_in(client, "local", ADA).status_code == 302
"""


@pytest.fixture
def plugin_only(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Arguments that load this package's plugin explicitly and nothing else automatically,
    whether or not the package is installed (its entry point would load it too)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return ["-p", "flask_social_oauth2.pytest_plugin", "-W", "error", "-p", "no:cacheprovider"]


def test_an_apps_tests_use_the_fixture_and_helpers(
    pytester: pytest.Pytester, plugin_only: list[str]
) -> None:
    pytester.makepyfile(test_my_app=APP_TESTS)
    result = pytester.runpytest_subprocess(*plugin_only)
    result.assert_outcomes(passed=4)


def test_the_fixture_is_listed_with_its_docstring(
    pytester: pytest.Pytester, plugin_only: list[str]
) -> None:
    result = pytester.runpytest_subprocess("--fixtures", *plugin_only)
    result.stdout.fnmatch_lines(["social_idp*", "*A started local identity provider*"])


def test_without_authlib_the_plugin_loads_and_the_fixture_says_what_to_install(
    pytester: pytest.Pytester, plugin_only: list[str]
) -> None:
    pytester.makeconftest(
        """
        import sys

        for name in ("authlib", "joserfc"):  # as if they were not installed
            sys.modules[name] = None
        """
    )
    pytester.makepyfile(
        test_app="""
        def test_unrelated():
            assert True

        def test_with_idp(social_idp):
            pass
        """
    )
    result = pytester.runpytest_subprocess(*plugin_only)
    result.assert_outcomes(passed=1, errors=1)
    output = result.stdout.str()
    assert "the local identity provider (flask_social_oauth2.local_idp) needs Authlib" in output
    assert 'pip install "flask-social-oauth2[idp]"' in output
    assert "Traceback" not in output


#: A ``sitecustomize`` that makes Authlib unimportable, as in an install without the idp extra.
_WITHOUT_AUTHLIB = """
import sys


class WithoutAuthlib:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "authlib":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, WithoutAuthlib())
"""


def run_without_authlib(tmp_path: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with Authlib unimportable, in ``tmp_path``, on this test run's package."""
    blocker = tmp_path / "without_authlib"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(_WITHOUT_AUTHLIB, encoding="utf-8")
    package_root = Path(flask_social_oauth2.__file__).parent.parent
    environment = {key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS"}
    environment["PYTHONPATH"] = os.pathsep.join([str(blocker), str(package_root)])
    return subprocess.run(
        [sys.executable, *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=environment,
    )


def test_without_the_idp_extra_the_readme_test_example_names_the_extra(tmp_path: Path) -> None:
    example = readme_block("# test_sign_in.py")
    (tmp_path / "test_sign_in.py").write_text(example.source, encoding="utf-8")
    pytest_run = run_without_authlib(tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert pytest_run.returncode != 0
    assert (
        "ImportError: the local identity provider (flask_social_oauth2.local_idp) needs Authlib,"
        " which is not installed (No module named 'authlib'):"
        ' pip install "flask-social-oauth2[idp]"'
    ) in pytest_run.stdout, pytest_run.stdout
    command_line = run_without_authlib(tmp_path, "-m", "flask_social_oauth2.local_idp", "--help")
    assert command_line.returncode == 1
    assert command_line.stderr.rstrip().endswith('pip install "flask-social-oauth2[idp]"')
    assert run_without_authlib(tmp_path, "-c", "import authlib").returncode == 1  # it is blocked


def test_importing_the_helpers_does_not_import_authlib() -> None:
    code = textwrap.dedent(
        """
        import sys
        import flask_social_oauth2.testing
        loaded = [m for m in sys.modules if m.split(".")[0] in ("authlib", "joserfc")]
        assert not loaded, loaded
        assert "flask_social_oauth2.local_idp" not in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


#: Run by pytest in a fresh interpreter, with the package's plugin loaded from its entry point
#: (the other installed plugins, which have their own imports, switched off): what the plugin
#: costs a project that never uses it.
_UNUSED_PLUGIN_RUN = """
import sys
import pytest

class Watch:
    def pytest_collection_finish(self, session):
        manager = session.config.pluginmanager
        assert manager.has_plugin("social_oauth2"), "the plugin is not loaded"
        assert hasattr(manager.get_plugin("social_oauth2"), "social_idp")
        heavy = ("requests", "urllib3", "oauthlib", "yaml", "authlib",
                 "flask_social_oauth2.providers.oauth2")
        print("LOADED", sorted(name for name in heavy if name in sys.modules))

sys.exit(pytest.main(
    ["-q", "-p", "no:cacheprovider", "-p", "no:pytest_flask_dance", "-p", "no:hypothesispytest",
     sys.argv[1]],
    plugins=[Watch()],
))
"""


def test_the_plugin_costs_nothing_when_unused(tmp_path: Path) -> None:
    (tmp_path / "test_unrelated.py").write_text("def test_unrelated():\n    assert True\n")
    run = subprocess.run(
        [sys.executable, "-c", _UNUSED_PLUGIN_RUN, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "LOADED []" in run.stdout, run.stdout


def test_the_plugin_entry_point_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {
        "social_oauth2": "flask_social_oauth2.pytest_plugin"
    }


# -- the helpers, used directly ------------------------------------------------------------------


@pytest.fixture
def started() -> Iterator[LocalIdentityProvider]:
    with local_idp() as provider:
        yield provider


def test_use_local_idp_points_one_app_at_the_provider(
    make_app: MakeApp, started: LocalIdentityProvider
) -> None:
    block = valid_block(
        redirectURL="/authenticate/github", customProperties={"issuer": "https://github.com"}
    )
    app = make_app({"github": block})
    before = dict(app.config["SOCIAL_OAUTH2_PROVIDERS"]["github"])
    provider = use_local_idp(app, "github", started)
    assert type(provider) is OAuth2Provider
    assert app.extensions["social_oauth2"].providers["github"] is provider
    assert provider.settings.authorization_url == started.authorization_url
    assert provider.settings.redirect_url == "/authenticate/github"
    assert provider.settings.scope == "openid profile email"
    assert dict(provider.settings.custom_properties) == {}
    assert app.config["SOCIAL_OAUTH2_PROVIDERS"]["github"] == before
    with pytest.raises(UnknownProviderError, match="'nope'"):
        use_local_idp(app, "nope", started)


def test_sign_in_returns_the_apps_answer_to_the_callback(
    make_app: MakeApp, started: LocalIdentityProvider
) -> None:
    app = make_app({"local": local_idp_block(started)})
    client = app.test_client()
    user = LocalUser.from_name_email("Grace Hopper", "grace@example.test")
    response = sign_in(client, user=user, next="/after")
    assert response.status_code == 302
    assert response.headers["Location"] == "/after"
    with client.session_transaction() as session:
        assert session["social_profile"]["full_name"] == "Grace Hopper"
    assert started.auto_approve is None, "sign_in left the provider approving"
    assert len(started.token_requests) == 1


def test_sign_in_explains_a_provider_that_is_not_local(make_app: MakeApp) -> None:
    app = make_app({"example": valid_block(redirectURL="/authenticate/example")})
    with pytest.raises(AssertionError, match="no local identity provider started"):
        sign_in(app.test_client(), "example")


def test_sign_in_explains_a_refused_authorization_request(
    make_app: MakeApp, started: LocalIdentityProvider
) -> None:
    block = local_idp_block(started, redirect_url="/authenticate/local")
    app = make_app({"local": {**block, "clientID": "unknown-client"}})
    with pytest.raises(AssertionError, match="answered HTTP 400"):
        sign_in(app.test_client(), "local")


def test_sign_in_takes_deny_or_token_failure_not_both(
    make_app: MakeApp, started: LocalIdentityProvider
) -> None:
    app = make_app({"local": local_idp_block(started)})
    with pytest.raises(ValueError, match="not both"):
        sign_in(app.test_client(), deny="access_denied", token_failure="html")


def test_sign_in_with_an_explicit_provider(make_app: MakeApp, idp: LocalIdentityProvider) -> None:
    """An identity provider started some other way (here conftest's) is passed as idp=."""
    app = make_app({"local": local_idp_block(idp, client_id="other", client_secret="s")})
    assert sign_in(app.test_client(), idp=idp).status_code == 302
    assert idp.auto_approve is not None  # conftest's own setting is restored

"""Sphinx configuration: the docs/ pages are Markdown (MyST); the API reference is autodoc."""

from __future__ import annotations

import importlib.metadata

project = "flask-social-oauth2"
author = "the flask-social-oauth2 contributors"
copyright = "the flask-social-oauth2 contributors"
release = importlib.metadata.version("flask-social-oauth2")
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "research"]  # working notes for issues, not user docs

myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

# Every reference must resolve (-n), except where it cannot: into the standard library and other
# projects (the build runs offline, so no intersphinx inventories), to private names, and to the
# package's internal modules, whose types appear in the signatures of provider-subclass hooks
# but which are not part of the reference.
nitpicky = True
INTERNAL_MODULES = (
    "checks|cli|config|oauth|oidc|web|accounts|options|providers|pytest_plugin|runtime"
    "|urls|local_idp|routes"
)
nitpick_ignore_regex = [
    (r"py:.*", r"(collections|abc|typing|types|datetime|pathlib|logging|http|enum|contextlib)\..*"),
    (r"py:.*", r"(flask|werkzeug|requests|urllib3|oauthlib|requests_oauthlib|blinker|click)\..*"),
    (r"py:.*", r"(joserfc|authlib|itsdangerous|yaml|pytest|_pytest|markupsafe)\..*"),
    (r"py:.*", r"(sqlalchemy|sa|cryptography)\..*"),
    (r"py:.*", r"URL|Engine|Connection"),  # SQLAlchemy's, named unqualified in annotations
    (r"py:.*", r"(Flask|Response|ResponseReturnValue|Request|TestResponse|FlaskClient)"),
    (r"py:.*", r"(.*\.)?_\w+"),
    (r"py:.*", rf"flask_social_oauth2\.({INTERNAL_MODULES})(\.\w+)*"),
    # type aliases of the local identity provider, named unqualified in its annotations
    (r"py:.*", r"Clock|IdTokenSigning|IdTokenTamper|TokenFailure"),
]

html_theme = "alabaster"
html_title = "flask-social-oauth2"

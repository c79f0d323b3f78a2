"""The example's Sign in with Bluesky: the defaults of its block's variables, and the handle form
of the sign-in and account pages.

A Bluesky sign-in starts from the account's handle (``/authenticate/bluesky?handle=...``), so the
pages show a small form instead of a link. The block uses the AT Protocol's loopback development
client (``clientID: http://localhost``), which only returns to ``127.0.0.1``: opened on another
host name, the form says where to go instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from flask import Request

from flask_social_oauth2 import SocialOAuth2

__all__ = ["DEFAULT_VARIABLES", "PROVIDER", "HandleForm", "form_action_sources", "handle_form"]

#: The block of ``providers.yaml`` that signs in from a handle.
PROVIDER: Final = "bluesky"
#: What ``create_app`` fills in for the ``bluesky`` block's variables that are not set:
#: Bluesky's own services (its entryway is its authorization server and answers
#: ``com.atproto.identity.resolveHandle`` for any handle).
DEFAULT_VARIABLES: Final[Mapping[str, str]] = {
    "BLUESKY_ENTRYWAY": "https://bsky.social",
    "BLUESKY_PLC_URL": "https://plc.directory",
    "BLUESKY_ALLOW_LOOPBACK": "false",
}
_LOOPBACK_CLIENT: Final = "http://localhost"
_LOOPBACK_REDIRECT_HOST: Final = "127.0.0.1"


@dataclass(frozen=True)
class HandleForm:
    """The handle form as a page shows it.

    :param provider: The block's name (the form's action is its sign-in route).
    :param entryway: The host of the authorization server that an empty handle starts at.
    :param open_instead: The address to open instead of this one, when the block's loopback
        client cannot come back to the host the page was opened on; else ``None``.
    """

    provider: str
    entryway: str
    open_instead: str | None = None


def handle_form(social: SocialOAuth2, request: Request) -> HandleForm | None:
    """The form for the ``bluesky`` block, or ``None`` when it is not configured."""
    if PROVIDER not in social.providers:
        return None
    settings = social.provider(PROVIDER).settings
    entryway = urlsplit(settings.authorization_url or "").netloc
    open_instead = None
    host = urlsplit(request.host_url)
    if settings.client_id == _LOOPBACK_CLIENT and host.hostname != _LOOPBACK_REDIRECT_HOST:
        port = f":{host.port}" if host.port else ""
        open_instead = f"http://{_LOOPBACK_REDIRECT_HOST}{port}/"
    return HandleForm(provider=PROVIDER, entryway=entryway, open_instead=open_instead)


def form_action_sources(social: SocialOAuth2) -> str:
    """The Content-Security-Policy ``form-action`` sources besides ``'self'`` that the handle
    form needs: the browser follows the sign-in's redirect from the form to the account's
    authorization server, which can be any https origin (and, with ``allowLoopback``, a server
    on this machine)."""
    if PROVIDER not in social.providers:
        return ""
    properties = social.provider(PROVIDER).settings.custom_properties
    if properties.get("allowLoopback") == "true":
        return " https: http://localhost:* http://127.0.0.1:*"
    return " https:"

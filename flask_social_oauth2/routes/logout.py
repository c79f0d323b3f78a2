"""The sign-out routes under ``<url rule>``: ``GET .../logged-out`` (the return of RP-Initiated
Logout), ``POST .../backchannel-logout`` (Back-Channel Logout 1.0) and
``GET .../frontchannel-logout`` (Front-Channel Logout 1.0), for configured providers and those
loaded at runtime alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Blueprint, Response, abort

from ..runtime import current_runtime

if TYPE_CHECKING:
    from ..providers.oauth2 import OAuth2Provider
    from ..tokens.session_index import SessionIndex

__all__ = ["mount_logout_routes"]


def mount_logout_routes(blueprint: Blueprint, rule: str) -> None:
    """Mount ``GET <url rule>/logged-out`` (the return of RP-initiated logout),
    ``POST <url rule>/backchannel-logout`` (Back-Channel Logout 1.0) and
    ``GET <url rule>/frontchannel-logout`` (Front-Channel Logout 1.0)."""
    blueprint.add_url_rule(f"{rule}/logged-out", "logged_out", _logged_out_view)
    blueprint.add_url_rule(
        f"{rule}/backchannel-logout",
        "backchannel_logout",
        _backchannel_view,
        methods=["POST"],
    )
    blueprint.add_url_rule(f"{rule}/frontchannel-logout", "frontchannel_logout", _frontchannel_view)


def _turned_on_provider(name: str, key: str) -> tuple[OAuth2Provider, SessionIndex]:
    """The provider ``name`` and the session index, when its block turns ``key`` on; else 404."""
    from ..providers.oauth2 import OAuth2Provider
    from ..web.logout import turned_on

    state = current_runtime()
    selected = state.find_provider(name)
    index = state.session_index
    if not isinstance(selected, OAuth2Provider) or index is None:
        abort(404)
    if not turned_on(selected.options, key):
        abort(404)
    return selected, index


def _backchannel_view(provider: str) -> Response:
    from ..web.backchannel import backchannel_logout
    from ..web.logout import BACKCHANNEL_KEY

    return backchannel_logout(*_turned_on_provider(provider, BACKCHANNEL_KEY))


def _frontchannel_view(provider: str) -> Response:
    from ..web.frontchannel import frontchannel_logout
    from ..web.logout import FRONTCHANNEL_KEY

    return frontchannel_logout(*_turned_on_provider(provider, FRONTCHANNEL_KEY))


def _logged_out_view(provider: str) -> Response:
    from ..web.logout import logged_out

    state = current_runtime()
    if state.find_provider(provider) is None:
        abort(404)
    return logged_out(provider, state.state_cookies)

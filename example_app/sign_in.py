"""How a sign-in ends in the example: the extension's success handler (find or make the app's
user, link the identity to them, sign them in with Flask-Login) and its error handler.
"""

from __future__ import annotations

from typing import Any

from flask import current_app, redirect, request, session, url_for
from flask.typing import ResponseReturnValue
from flask_login import current_user, login_user

from flask_social_oauth2 import OAuth2Info, SocialProfile, SocialProvider
from flask_social_oauth2.errors import AccessDeniedError, AuthenticationError, StateError

from .account import PROFILE_KEY
from .providers import label, social
from .security import render
from .users import Users

__all__ = ["sign_in_failed", "signed_in"]


def signed_in(provider: SocialProvider, info: OAuth2Info, profile: SocialProfile) -> Any:
    """After a sign-in: the app's user of this identity (found by the identity alone, never
    by e-mail), else the user already signed in (who is adding a provider), else a new user;
    the identity is linked to that user, who is signed in with Flask-Login."""
    extension = social()
    users: Users = current_app.extensions["example_users"]
    found = extension.identity(provider.name, profile.provider_key)
    user = users.get(found.user_id) if found is not None and found.user_id else None
    if user is None and current_user.is_authenticated:
        user = users.get(current_user.id)
    if user is None:
        name = profile.full_name or profile.username or profile.email or "New user"
        user = users.create(name)
    extension.link(user.id)
    login_user(user)
    session[PROFILE_KEY] = profile.to_dict()
    target = extension.next_url(url_for("example.profile"))
    if request.is_json:  # the client-side page's POST: its script goes on to `next`
        return {"signed_in": True, "provider": provider.name, "next": target}
    return redirect(target)


def sign_in_failed(provider_name: str, error: AuthenticationError) -> ResponseReturnValue:
    """The error page of a failed or cancelled sign-in (or API call), with the error's public
    message only."""
    signed_in_now = isinstance(session.get(PROFILE_KEY), dict) or current_user.is_authenticated
    if isinstance(error, StateError) and signed_in_now:
        # Back to a used callback after signing in: the flow is over, the user is signed in.
        return redirect(url_for("example.profile"))
    title = "Sign-in cancelled" if isinstance(error, AccessDeniedError) else "Sign-in failed"
    return render(
        "error.html",
        error.status_code,
        title=title,
        message=error.public_message,
        provider_label=label(provider_name)[0],
        code=error.status_code,
    )

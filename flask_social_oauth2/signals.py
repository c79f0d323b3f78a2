"""blinker signals for observers of sign-ins (audit logs, metrics).

All are sent with the app as sender::

    from flask_social_oauth2.signals import authenticated

    @authenticated.connect_via(app)
    def audit(app, provider, info, profile): ...
"""

from __future__ import annotations

from blinker import Namespace

_signals = Namespace()

#: Sent after a successful sign-in through the built-in route, with ``provider``
#: (:class:`~flask_social_oauth2.SocialProvider`), ``info``
#: (:class:`~flask_social_oauth2.OAuth2Info`) and ``profile``
#: (:class:`~flask_social_oauth2.SocialProfile`).
authenticated = _signals.signal("social-oauth2-authenticated")

#: Sent when a sign-in through the built-in route fails, with ``provider_name`` (str) and ``error``
#: (:class:`~flask_social_oauth2.errors.AuthenticationError`).
authentication_failed = _signals.signal("social-oauth2-authentication-failed")

#: Sent after a token was refreshed and saved, with ``provider`` (the provider's name), ``key``
#: (the identity's ``provider_key``) and ``info`` (the new
#: :class:`~flask_social_oauth2.OAuth2Info`).
token_updated = _signals.signal("social-oauth2-token-updated")

#: Sent once when a request finds that the provider ended the browser's session there
#: (back-channel or front-channel logout, possibly delivered to another process): the browser
#: is signed out of the extension already; end the app's own login (Flask-Login's
#: ``logout_user()``). With ``provider`` (the provider's name), ``sub`` and ``sid`` (``None``
#: when the ID token had none).
provider_logged_out = _signals.signal("social-oauth2-provider-logged-out")

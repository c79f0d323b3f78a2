"""``GET``/``POST <url rule>``: the sign-in route. It finds the provider (configured, or loaded
at runtime), lets it run the flow's steps, and answers with the app's handlers: a finished
sign-in is kept (:func:`~flask_social_oauth2.accounts.remember_sign_in`) and handed to
``on_authenticated``, a failed one to ``on_error`` (else a small page)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from flask import Response, abort, current_app, jsonify, make_response, request, session
from flask.typing import ResponseReturnValue

from .. import accounts, signals
from ..errors import (
    AuthenticationError,
    ConfigurationError,
    ConfigurationProblem,
    InvalidCallbackError,
)
from ..runtime import Runtime, current_runtime
from ..web.callback import finished_flow, read_posted_code
from ..web.pages import error_page, misconfigured_page
from ..web.start_confirmation import StartConfirmation
from ..web.state_cookie import FLOW_PAGE_HEADERS

if TYPE_CHECKING:
    from ..config.settings import OAuth2Info, SocialProfile
    from ..providers.oauth2 import OAuth2Provider
    from ..web.provider import SocialProvider

    AuthenticatedHandler = Callable[
        [SocialProvider, OAuth2Info, SocialProfile], ResponseReturnValue
    ]
    ErrorHandler = Callable[[str, AuthenticationError], ResponseReturnValue]

__all__ = ["SignInHandlers", "next_url"]

logger = logging.getLogger("flask_social_oauth2")


@dataclass(slots=True)
class SignInHandlers:
    """The app's handlers of a finished sign-in, which the extension registers
    (``on_authenticated``, ``on_error``) and its route calls; ``None``: the default answer."""

    authenticated: AuthenticatedHandler | None = None
    error: ErrorHandler | None = None

    def view(self, provider: str) -> ResponseReturnValue:
        """The sign-in route's view (see the module)."""
        state = current_runtime()
        selected = state.find_provider(provider)
        if selected is None:
            abort(404)
        if state.redirect_problems:
            problems = [p for p in state.redirect_problems if p.provider == selected.name]
            if problems:
                return misconfigured_page(problems)
        if not current_app.secret_key:
            missing = ConfigurationProblem(
                None, "SECRET_KEY", "is not set: the state cookie needs it"
            )
            logger.error("%s", missing)
            return misconfigured_page([missing])
        posted_id_token = request.method == "POST" and _takes_id_token(selected)
        posted_json = (
            request.method == "POST"
            and not posted_id_token
            and not _has_form_post_callback(selected)
            and not StartConfirmation.is_posted()
        )
        try:
            if posted_id_token:
                info = _finish_id_token_sign_in(selected, state)
            elif posted_json:
                info = _exchange_posted_code(selected)
            else:
                result = selected.authenticate()
                if isinstance(result, Response):
                    return result
                info = result
            profile = selected.retrieve_profile(info)
        except AuthenticationError as error:
            return self.respond_to_error(selected.name, error)
        except ConfigurationError as error:  # found only now, e.g. in the provider's metadata
            for problem in error.problems:
                logger.error("%s", problem)
            return misconfigured_page(list(error.problems))
        return self._respond_to_success(selected, info, profile, answer_json=posted_json)

    def handle_error(self, error: AuthenticationError) -> ResponseReturnValue:
        """The app's error handler of :class:`~flask_social_oauth2.errors.
        AuthenticationError` raised outside the route (e.g. by ``social.api()`` in a view)."""
        return self.respond_to_error(error.provider, error)

    def respond_to_error(self, provider_name: str, error: AuthenticationError) -> Response:
        """The answer to a failed sign-in: the app's ``on_error``, else the ready sign-in page
        with the error's message where it is mounted, else a small page."""
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        logger.warning("sign-in failed: %s", error)
        signals.authentication_failed.send(app, provider_name=provider_name, error=error)
        if self.error is not None:
            response = make_response(self.error(provider_name, error))
            for header, value in FLOW_PAGE_HEADERS.items():
                response.headers.setdefault(header, value)
            return response
        if current_runtime(app).sign_in_page is not None:
            from ..providers.buttons import show_sign_in_page

            return show_sign_in_page(error.public_message, error.status_code)
        return error_page(error.public_message, error.status_code)

    def _respond_to_success(
        self,
        provider: SocialProvider,
        info: OAuth2Info,
        profile: SocialProfile,
        *,
        answer_json: bool,
    ) -> Response:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        try:
            accounts.remember_sign_in(provider.name, profile.provider_key, info)
        except AuthenticationError as error:
            return self.respond_to_error(provider.name, error)
        signals.authenticated.send(app, provider=provider, info=info, profile=profile)
        if self.authenticated is not None:
            response = make_response(self.authenticated(provider, info, profile))
            for header, value in FLOW_PAGE_HEADERS.items():
                response.headers.setdefault(header, value)
            return response
        session[current_runtime(app).session_key] = profile.to_dict()
        target = next_url()
        if answer_json:  # a client-side framework's POST; a form-post callback ends as a GET
            response = jsonify(signed_in=True, provider=provider.name, next=target)
        else:
            response = app.response_class(status=302)
            response.headers["Location"] = target
        headers = response.headers
        for header, value in FLOW_PAGE_HEADERS.items():  # a response of ours: none of them yet
            headers.add(header, value)
        return response


def next_url(default: str = "/") -> str:
    """Where to send the user after the sign-in this request finished: the ``next`` path given
    when it started (checked to be same-origin), else ``default``."""
    pending = finished_flow()
    return pending.next_url if pending is not None and pending.next_url else default


def _is_oauth2(provider: object) -> TypeGuard[OAuth2Provider]:
    from ..providers.oauth2 import OAuth2Provider  # imported by init_app: a lookup

    return isinstance(provider, OAuth2Provider)


def _has_form_post_callback(provider: SocialProvider) -> bool:
    """Whether ``provider``'s callback is a form ``POST`` (``response_mode=form_post``: Apple,
    or a block's ``customProperties.responseMode``), read by its own
    :meth:`~SocialProvider.authenticate`."""
    return _is_oauth2(provider) and provider.uses_form_post()


def _takes_id_token(provider: SocialProvider) -> bool:
    from ..web.id_token_sign_in import is_posted  # imported by init_app: a lookup

    return _is_oauth2(provider) and is_posted(provider.options)


def _finish_id_token_sign_in(provider: SocialProvider, runtime: Runtime) -> OAuth2Info:
    from ..web.id_token_sign_in import finish

    assert _is_oauth2(provider)
    return finish(provider, runtime)


def _exchange_posted_code(provider: SocialProvider) -> OAuth2Info:
    """``POST /authenticate/<provider>`` with ``{"code": "...", "code_verifier": "..."}`` from a
    client-side framework (see :func:`~flask_social_oauth2.web.callback.read_posted_code`);
    accepted only for providers without ``authorizationURL``, whose flow the browser ran."""
    from ..web import sign_in

    if not _is_oauth2(provider) or provider.settings.authorization_url is not None:
        raise InvalidCallbackError(
            provider.name,
            "POST is only for providers used with a client-side framework (no authorizationURL)",
            status_code=405,
        )
    code, verifier = read_posted_code(provider.name)
    return sign_in.finish_posted_code(provider, code, verifier)

"""The exceptions raised by flask-social-oauth2.

Every message names the provider and the key or step that failed. No message ever contains a
client secret, an authorization code, a PKCE verifier or a token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class SocialOAuth2Error(Exception):
    """Base class of every error this extension raises."""


@dataclass(frozen=True, slots=True)
class ConfigurationProblem:
    """One problem found in a provider's configuration.

    :param provider: The provider block's name, or ``None`` for a problem of the whole source.
    :param key: The configuration key at fault, or ``None``.
    :param message: What is wrong, safe to show (never contains a value of a secret key).
    :param location: Where the block came from, e.g. ``providers.yaml, line 4``.
    """

    provider: str | None
    key: str | None
    message: str
    location: str | None = None

    def __str__(self) -> str:
        where = []
        if self.provider is not None:
            where.append(f"provider {self.provider!r}")
        if self.key is not None:
            where.append(f"key {self.key!r}")
        text = f"{', '.join(where)}: {self.message}" if where else self.message
        return f"{text} ({self.location})" if self.location else text


class ConfigurationError(SocialOAuth2Error):
    """The configuration of one or more providers is invalid.

    :param problems: Every problem found, so that all can be fixed at once.
    """

    def __init__(self, problems: Sequence[ConfigurationProblem] | str) -> None:
        if isinstance(problems, str):
            problems = [ConfigurationProblem(None, None, problems)]
        self.problems: tuple[ConfigurationProblem, ...] = tuple(problems)
        if len(self.problems) == 1:
            message = str(self.problems[0])
        else:
            lines = "\n".join(f"  - {problem}" for problem in self.problems)
            message = f"{len(self.problems)} problems in the OAuth2 configuration:\n{lines}"
        super().__init__(message)


class UnknownProviderError(SocialOAuth2Error, LookupError):
    """No provider of that name is configured."""

    def __init__(self, name: str, known: Sequence[str] = ()) -> None:
        self.name = name
        hint = f"; configured: {', '.join(sorted(known))}" if known else "; none is configured"
        super().__init__(f"unknown provider {name!r}{hint}")


class AuthenticationError(SocialOAuth2Error):
    """A sign-in flow failed.

    :param provider: The provider's name.
    :param message: A description for logs and developers; never contains a secret.
    :param status_code: The HTTP status the built-in route answers with.
    """

    #: The status the built-in route answers with.
    status_code: int = 400
    #: A fixed, user-facing sentence: the default error page shows this, never ``message``.
    public_message: str = "Sign-in could not be completed. Please try again."

    def __init__(self, provider: str, message: str, *, status_code: int | None = None) -> None:
        self.provider = provider
        if status_code is not None:
            self.status_code = status_code
        super().__init__(f"provider {provider!r}: {message}")


class AccessDeniedError(AuthenticationError):
    """The user (or the provider) refused the authorization, or the verified ID token's tenant
    is not one the block's ``customProperties.allowedTenants`` lists."""

    status_code = 403
    public_message = "Sign-in was cancelled or refused at the provider."


class ProviderRefusedError(AuthenticationError):
    """The provider answered the authorization request with an error code other than
    ``access_denied``.

    :param error_code: The provider's ``error`` value, cut to a safe length and charset.
    """

    public_message = "The provider refused the sign-in request."

    def __init__(self, provider: str, error_code: str) -> None:
        self.error_code = error_code
        super().__init__(provider, f"authorization request failed with error {error_code!r}")


class StateError(AuthenticationError):
    """The callback's state is missing, unknown, expired, replayed or meant for another
    provider."""

    public_message = "This sign-in link is invalid or has expired. Please start again."

    @classmethod
    def without_cookie(cls, provider: str, host: str | None) -> StateError:
        """The error of a callback that carried a state but no state cookie at all: the
        sign-in was started at another address of the app (``localhost`` against
        ``127.0.0.1``, another port or scheme), the browser blocked the cookie, or the sign-in
        was finished already (the cookie goes with the browser's last pending sign-in).

        :param host: The host (and port) of the configured redirect URL, where the app must
            be opened; ``None`` for a relative redirect URL (the host is the request's).
        """
        where = f" at {host}" if host else ""
        error = cls(
            provider,
            "no state cookie arrived with the callback: the sign-in was started at another"
            " address (host, port or scheme), cookies were blocked, or it was finished"
            f" already; open the app{where}",
        )
        error.public_message = (
            "This sign-in link is invalid or has expired here: it was started at another"
            " address, your browser blocked its cookie, or it was finished already."
            + (f" Open the app at {host} and sign in again." if host else " Please start again.")
        )
        return error


class InvalidCallbackError(AuthenticationError):
    """The callback's query is malformed: a repeated or oversized parameter, or no code."""

    public_message = "The sign-in request was malformed. Please start again."


class StartNotConfirmedError(AuthenticationError):
    """A sign-in start posted back from the page that asks the user to confirm a start from
    another site, without a token issued to this browser for this provider, or from another
    origin. Nothing was sent to the provider."""

    status_code = 403
    public_message = (
        "This sign-in confirmation is invalid or has expired. Please start the sign-in again."
    )


class UnexpectedResponseError(AuthenticationError):
    """The provider's token endpoint failed or answered something that is not a valid token.

    The status is 502 for a bad answer and 504 when the provider did not answer in time.
    """

    status_code = 502
    public_message = "The provider did not answer as expected. Please try again later."
    #: The OAuth ``error`` code the provider answered (e.g. ``invalid_grant``), cut to a safe
    #: length and charset; ``None`` when it answered none.
    error_code: str | None = None

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        status_code: int | None = None,
        error_code: str | None = None,
    ) -> None:
        super().__init__(provider, message, status_code=status_code)
        self.error_code = error_code


class ProfileRetrievalError(AuthenticationError):
    """The user's profile could not be fetched from the provider or could not be read."""

    status_code = 502
    public_message = "Your profile could not be read from the provider. Please try again later."


class DiscoveryError(UnexpectedResponseError):
    """The provider's OpenID Connect discovery document or key set (JWKS) could not be fetched,
    or is not valid (e.g. it names another issuer). 502, or 504 when it did not come in time."""

    public_message = "The provider's sign-in configuration could not be read. Please try later."


class IdTokenError(UnexpectedResponseError):
    """The ID token of an OpenID Connect token response failed verification: signature,
    algorithm, issuer, audience, expiry or nonce. The message names the check, never the token
    or a claim's value."""

    public_message = "The provider's answer could not be verified. Please try again."


class LogoutTokenError(AuthenticationError):
    """A back-channel logout token failed a check of OpenID Connect Back-Channel Logout 1.0
    section 2.6 (or was seen before). 400: the request is refused and nothing is ended. The
    message names the check, never the token or a claim's value."""

    public_message = "The logout token was refused."


class SignInRequiredError(AuthenticationError):
    """This identity cannot call the provider's API now: the browser has no identity for the
    provider, no token is kept, the provider refused the refresh (``invalid_grant``: the dead
    token is deleted), or the stored token cannot be decrypted (a wrong key or a damaged row;
    the row is kept for a later key fix). The user has to sign in again. 401."""

    status_code = 401
    public_message = "Please sign in again."


class TokenStoreUnavailableError(AuthenticationError):
    """The token store could not be read or written (e.g. the database went away); nothing was
    half-written. 503."""

    status_code = 503
    public_message = "Your sign-in could not be checked right now. Please try again later."


class ProviderUnavailableError(AuthenticationError):
    """The app's provider loader (:meth:`SocialOAuth2.provider_loader
    <flask_social_oauth2.SocialOAuth2.provider_loader>`) raised, returned a block that does not
    validate, or returned something other than a provider or ``None``: the sign-in cannot start
    or finish now. The message names the loader and the reason (never a secret); the answer is
    not kept, so the next request asks the loader again. 503."""

    status_code = 503
    public_message = "This sign-in is not available right now. Please try again later."


class ResolutionError(AuthenticationError):
    """An AT Protocol identity could not be resolved: a handle, a DID, its document, its PDS
    or the PDS's authorization server. 502 when a server failed or answered something invalid,
    504 when it did not answer in time; the subclass :class:`InvalidIdentifierError` (400) is
    the user's input at fault.

    :param reason: A short, fixed code saying which check failed (``"timeout"``,
        ``"refused_address"``, ``"did_mismatch"``...), for logs and tests; never a secret.
    :param message: A description for logs and developers.
    :param status_code: The HTTP status the built-in route answers with.
    :param provider: The provider block's name.
    :param http_status: The status a server answered, when the failure is that status.
    """

    status_code = 502
    public_message = "Your account's server could not be found or did not answer as expected."

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        status_code: int | None = None,
        provider: str = "bluesky",
        http_status: int | None = None,
    ) -> None:
        self.reason = reason
        self.http_status = http_status
        super().__init__(provider, f"{message} ({reason})", status_code=status_code)


class InvalidIdentifierError(ResolutionError):
    """The handle or DID given to start a sign-in is not one: bad syntax, a reserved top-level
    domain, or a handle no server knows. 400."""

    status_code = 400
    public_message = "That is not a valid handle or DID. Please check it and try again."


class AccountNotFoundError(InvalidIdentifierError):
    """The handle or DID is well formed but names no account: no resolver or DNS record knows
    the handle, or the PLC directory does not know the DID (a typing mistake, or a deleted
    account). 400."""

    public_message = "No account was found for that handle or DID. Please check it and try again."

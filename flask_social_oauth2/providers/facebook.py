"""Facebook: the Graph API ``/me`` node, with the optional ``appsecret_proof``."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

from ..config.profile_fields import ProfileFields
from ..config.provider_options import PropertyReader
from ..config.settings import OAuth2Info
from .base import BuiltinProvider, provider_class
from .facts import Param, PropertyRule, ProviderFacts
from .hooks import HookedProvider, ProviderHooks

#: The Graph API version of the built-in addresses.
GRAPH_VERSION: Final = "v25.0"
#: The fields asked for when ``customProperties.fields`` is not set.
DEFAULT_FIELDS: Final = "id,name,first_name,last_name,email,picture.type(large)"

FACTS: Final = ProviderFacts(
    name="facebook",
    title="Facebook",
    class_name="FacebookProvider",
    code=True,
    code_quirks=("`appsecret_proof`",),
    authorization_url=f"https://www.facebook.com/{GRAPH_VERSION}/dialog/oauth",
    token_url=f"https://graph.facebook.com/{GRAPH_VERSION}/oauth/access_token",
    profile_url=f"https://graph.facebook.com/{GRAPH_VERSION}/me",
    scope=("public_profile", "email"),
    profile=ProfileFields(
        provider_key="id",
        first_name="first_name",
        last_name="last_name",
        full_name="name",
        email="email",
        avatar_url="picture.data.url",
    ),
    profile_params=(Param("fields", DEFAULT_FIELDS, "fields"),),
    property_rules=(PropertyRule("appsecretProof", "choice", ("true", "false")),),
    api_base=f"https://graph.facebook.com/{GRAPH_VERSION}/",
    init_custom_properties={"appsecretProof": "true"},
    docs=f"""\
Create an app at [Meta for Developers](https://developers.facebook.com/apps/) with *Facebook
Login* and add the callback under *Valid OAuth Redirect URIs*. The Graph API returns only the
fields a request names; `customProperties`:

* `fields`: the field list of the `/me` call (default
  `{DEFAULT_FIELDS}`). The picture is read from
  `picture.data.url`.
* `appsecretProof`: `"true"` sends `appsecret_proof` (HMAC-SHA256 of the access token keyed
  with the client secret, hex) with the profile call; needed when the app has *Require App
  Secret* turned on. `"false"` (the default) does not.

Facebook does not say whether the address is verified (`email_verified` is `None`). The
built-in addresses use Graph API `{GRAPH_VERSION}`; pin another version with `apiURL` and the
version in `authorizationURL`/`accessTokenURL`.
""",
)


def appsecret_proof(access_token: str, client_secret: str) -> str:
    """Facebook's ``appsecret_proof``: HMAC-SHA256 of the access token keyed with the app
    secret, in hex."""
    key = client_secret.encode("utf-8")
    return hmac.new(key, access_token.encode("utf-8"), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class FacebookOptions:
    """The ``customProperties`` only Facebook reads (their form is checked by :data:`FACTS`)."""

    #: ``appsecretProof`` is ``"true"``.
    appsecret_proof: bool


class FacebookHooks(ProviderHooks):
    """With ``customProperties.appsecretProof: "true"`` each call also carries
    ``appsecret_proof``, which is bound to the token and reveals neither it nor the secret."""

    __slots__ = ()

    def read_options(self, read: PropertyReader) -> FacebookOptions:
        return FacebookOptions(appsecret_proof=read.is_true("appsecretProof"))

    def profile_query(
        self, provider: HookedProvider, info: OAuth2Info, params: dict[str, str]
    ) -> dict[str, str]:
        if provider.options.own_as(FacebookOptions).appsecret_proof:
            secret = provider.settings.client_secret
            params["appsecret_proof"] = appsecret_proof(info.access_token, secret)
        return params


if TYPE_CHECKING:  # for type checkers, the class is what it is: a BuiltinProvider
    FacebookProvider: TypeAlias = BuiltinProvider
else:
    FacebookProvider = provider_class(
        FACTS,
        FacebookHooks(),
        module=__name__,
        doc="Sign in with Facebook; ``appsecret_proof`` when ``customProperties.appsecretProof``.",
    )

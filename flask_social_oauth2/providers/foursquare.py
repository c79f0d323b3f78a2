"""Foursquare (legacy v2 user authentication): ``users/self``."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import Param, PropertyRule, ProviderFacts

#: The ``v`` date sent when ``customProperties.apiVersion`` is not set.
DEFAULT_API_VERSION: Final = "20231010"

FACTS: Final = ProviderFacts(
    name="foursquare",
    title="Foursquare (legacy)",
    class_name="FoursquareProvider",
    authorization_url="https://foursquare.com/oauth2/authenticate",
    token_url="https://foursquare.com/oauth2/access_token",
    profile_url="https://api.foursquare.com/v2/users/self",
    profile=ProfileFields(
        provider_key="response.user.id",
        first_name="response.user.firstName",
        last_name="response.user.lastName",
        email="response.user.contact.email",
    ),
    profile_params=(Param("v", DEFAULT_API_VERSION, "apiVersion"),),
    token_query_parameter="oauth_token",
    property_rules=(PropertyRule("apiVersion", "pattern", (r"\d{8}", DEFAULT_API_VERSION)),),
    api_base="https://api.foursquare.com/v2/",
    docs=f"""\
**Legacy.** Foursquare's v2 user authentication applies only to projects created before
November 18, 2021; newer projects get the v3 Places API with service keys, which has no
sign-in. The profile is `GET /v2/users/self`: Foursquare v2 takes the token only as the
`oauth_token` query parameter (sent to `api.foursquare.com` and nowhere else; keep request
URLs out of your logs) together with the API version date `v`
(`customProperties.apiVersion`, default `{DEFAULT_API_VERSION}`; v2 refuses dates up to
20120609). `full_name` is first and last name joined; Foursquare does not say whether the
address is verified. The avatar (`photo.prefix` + size + `photo.suffix`) is left in `raw`.
The recorded answers of the tests are a peer library's (Silhouette's), as Foursquare's own
could not be read.
""",
)

"""Meetup: the GraphQL API's ``self``."""

from __future__ import annotations

import json
from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import ProviderFacts

#: The GraphQL query of the profile call (the fields Meetup's guide shows).
QUERY: Final = "query { self { id name } }"

FACTS: Final = ProviderFacts(
    name="meetup",
    title="Meetup",
    class_name="MeetupProvider",
    authorization_url="https://secure.meetup.com/oauth2/authorize",
    token_url="https://secure.meetup.com/oauth2/access",
    profile_url="https://api.meetup.com/gql-ext",
    profile=ProfileFields(provider_key="data.self.id", full_name="data.self.name"),
    profile_method="POST",
    profile_json_body=json.dumps({"query": QUERY}),
    api_base="https://api.meetup.com/gql-ext",
    docs=f"""\
Create an OAuth client on [meetup.com/api/oauth/list](https://www.meetup.com/api/oauth/list/).
Meetup's API is GraphQL only (the REST `/2/member/self` other libraries read is gone), so the
profile is a `POST` to `https://api.meetup.com/gql-ext` with the query `{QUERY}` as
Meetup's guide shows it: `provider_key` is `self.id`, `full_name` `self.name`; the other
fields are `None` (query more with your own call). A GraphQL error answer has no `self` and
is a `ProfileRetrievalError`. The redirect URL must be on the registered callback's host and
port, its path below the registered one.
""",
)

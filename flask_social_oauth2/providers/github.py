"""GitHub (and GitHub Enterprise Server): the authenticated user."""

from __future__ import annotations

from typing import Final

from ..config.profile_fields import ProfileFields
from .facts import EmailList, ProviderFacts, Quirk

FACTS: Final = ProviderFacts(
    name="github",
    title="GitHub",
    class_name="GitHubProvider",
    authorization_url="https://github.com/login/oauth/authorize",
    token_url="https://github.com/login/oauth/access_token",
    profile_url="https://api.github.com/user",
    scope=("read:user", "user:email"),
    profile=ProfileFields(
        provider_key="id",
        username="login",
        full_name="name",
        email="email",
        avatar_url="avatar_url",
    ),
    api_headers={"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"},
    email_list=EmailList(entries="", address="email", primary="primary", verified="verified"),
    quirks=frozenset({Quirk.ERROR_IN_200_TOKEN_ANSWER}),
    api_base="https://api.github.com/",
    docs="""\
Register an OAuth app under [Settings → Developer settings → OAuth Apps](https://github.com/settings/developers)
(or a GitHub App). `username` is the `login`. A user who keeps the e-mail address private has
`"email": null` in `/user`; the address is then read from `/user/emails` (scope `user:email`),
taking the entry that is both primary and verified, never an unverified one
(`email_verified` is then true; for a public address GitHub's `/user` says nothing, so it is
`None`). If that list cannot be read, the profile comes without an e-mail address.
`customProperties.emailsURL` overrides the list's address (default: the profile address plus
`/emails`). GitHub answers a failed code exchange with HTTP 200 and an `error` field; that
answer is refused like any other token error.

### GitHub Enterprise Server: a second block with a built-in class

A block's name selects its class, so a second GitHub (an Enterprise Server, or a second
github.com app) needs its class named, in the configuration or when creating the extension:

```python
from flask import Flask

from flask_social_oauth2 import SocialOAuth2
from flask_social_oauth2.providers import BUILTIN_PROVIDERS

app = Flask(__name__)
app.config["SOCIAL_OAUTH2_PROVIDER_CLASSES"] = {"github-enterprise": "github"}
# or, when creating the extension:
social = SocialOAuth2(provider_classes={"github-enterprise": BUILTIN_PROVIDERS["github"]})
```

The block then gets all of GitHub's behaviour (the private e-mail lookup goes to
`<apiURL>/emails`):

```yaml
github-enterprise:
  authorizationURL: https://${GHE_HOST}/login/oauth/authorize
  accessTokenURL: https://${GHE_HOST}/login/oauth/access_token
  apiURL: https://${GHE_HOST}/api/v3/user
  redirectURL: /authenticate/github-enterprise
  clientID: ${GHE_CLIENT_ID}
  clientSecret: ${GHE_CLIENT_SECRET}
  scope: "read:user user:email"
```

The same works for every built-in provider, e.g. `{"google-workspace": "google"}`.
""",
)

"""The one table of built-in provider cases: each provider's recorded answers, where they are
served and the profile a sign-in must give (the harness that runs them: :mod:`provider_sign_in`).

Apple and Bluesky have no profile endpoint; their sign-ins have modules of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from fault_server import FaultServer, RecordedRequest
from provider_sign_in import ACCESS_TOKEN, ProviderCase, expect

OIDC_TRIM: Final = ("name", "given_name", "family_name", "preferred_username", "email", "picture")

#: Every built-in provider but those of :data:`TESTED_ELSEWHERE`, by name.
CASES: Final[Mapping[str, ProviderCase]] = MappingProxyType(
    {
        "amazon": ProviderCase(
            "/user/profile",
            expect("amzn1.account.K2LI23KL2LK2", full="John Doe", email="johndoe@example.com"),
            trim=("name", "email"),
            read_alone=True,
        ),
        "atlassian": ProviderCase(
            "/me",
            expect(
                "557057:4f9acfd2-6155-419b-8de5-5b5cf27a59a0",
                username="marshmallow",
                full="Lila User",
                email="vmars@marsinvestigations.com",
                avatar="https://www.example.com/avatars/userl",
            ),
            trim=("nickname", "name", "email", "picture"),
        ),
        "auth0": ProviderCase(
            "/userinfo",
            expect(
                "auth0|5f7c8ec7c33c6c004bbafe82",
                username="j.doe",
                first="Jane",
                last="Doe",
                full="Jane Josephine Doe",
                email="janedoe@exampleco.com",
                verified=True,
                avatar="http://exampleco.com/janedoe/me.jpg",
            ),
            trim=OIDC_TRIM,
            read_alone=True,
        ),
        "authentiq": ProviderCase(
            "/userinfo",
            expect(
                "<SUB>",
                first="<GIVEN_NAME>",
                last="<FAMILY_NAME>",
                full="<NAME>",
                email="<EMAIL>",
                verified=True,
                avatar="https://connect.authentiq.io/<PICTURE>.png",
            ),
            trim=OIDC_TRIM,
        ),
        "azure": ProviderCase(
            "/v1.0/me",
            expect(
                "48d31887-5fad-4d73-a9f5-3c356e68a038",
                username="MeganB@contoso.com",
                first="Megan",
                last="Bowen",
                full="Megan Bowen",
                email="MeganB@contoso.com",
            ),
            profile="microsoft",
            trim=("displayName", "givenName", "surname", "mail", "userPrincipalName"),
        ),
        "bitbucket": ProviderCase(
            "/2.0/user",
            expect(
                "{d301aafa-d676-4ee0-88be-962be7417567}",
                username="evzijst",
                full="Erik van Zijst",
                email="erik@example.com",
                verified=True,
                avatar="https://secure.gravatar.com/avatar/f6bcbb4e3f665e74455bd8c0b4b3afba?d=https%3A%2F%2Favatar-management--avatars.us-west-2.prod.public.atl-paas.net%2Finitials%2FEZ-2.png",
            ),
            trim=("display_name", "nickname", "links.avatar"),
            extra=MappingProxyType({"/2.0/user/emails": "bitbucket.emails"}),
            read_alone=True,
        ),
        "cognito": ProviderCase(
            "/oauth2/userInfo",
            expect("<UUID>", username="<USERNAME>", email="<EMAIL>", verified=True),
            trim=("username", "email"),
        ),
        "dexcom": ProviderCase("/v3/users/self/dataRange", expect("<USER_ID>")),
        "digitalocean": ProviderCase(
            "/v2/account",
            expect(
                "b6fr89dbf6d9156cace5f3c78dc9851d957381ef",
                full="Sammy the Shark",
                email="sammy@digitalocean.com",
                verified=True,
            ),
            trim=("account.name", "account.email"),
        ),
        "discord": ProviderCase(
            "/api/v10/users/@me",
            expect(
                "80351110224678912",
                username="nelly",
                full="Nelly",
                email="nelly@discord.com",
                verified=True,
                avatar="https://cdn.discordapp.com/avatars/80351110224678912/8342729096ea3675442027381ff50dfe.png",
            ),
            trim=("global_name", "username", "email", "avatar"),
            read_alone=True,
        ),
        "dropbox": ProviderCase(
            "/2/users/get_current_account",
            expect(
                "dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc",
                first="Franz",
                last="Ferdinand",
                full="Franz Ferdinand (Personal)",
                email="franz@example.com",
                verified=True,
                avatar="https://dl-web.dropbox.com/account_photo/get/dbaphid%3AAAHWGmIXV3sUuOmBfTz0wPsiqHUpBWvv3ZA?vers=1556069330102&size=128x128",
            ),
            trim=("name", "email", "profile_photo_url"),
            read_alone=True,
        ),
        "facebook": ProviderCase(
            "/v25.0/me",
            expect(
                "100001234567890",
                first="Jane",
                last="Smith",
                full="Jane Smith",
                email="jsmith@example.com",
                avatar="https://platform-lookaside.fbsbx.com/platform/profilepic/?asid=100001234567890&height=200&width=200&ext=1700000000&hash=AeQexampleHash",
            ),
            trim=("name", "first_name", "last_name", "email", "picture"),
            read_alone=True,
        ),
        "fitbit": ProviderCase(
            "/1/user/-/profile.json",
            expect(
                "<ENCODED_ID>",
                first="<FIRST_NAME>",
                last="<LAST_NAME>",
                full="<FULL_NAME>",
                avatar="https://static0.fitbit.com/images/profile/defaultProfile_640.png",
            ),
            trim=(
                "user.fullName",
                "user.displayName",
                "user.firstName",
                "user.lastName",
                "user.avatar",
                "user.avatar150",
                "user.avatar640",
            ),
        ),
        "foursquare": ProviderCase(
            "/v2/users/self",
            expect(
                "13221052",
                first="Apollonia",
                last="Vanova",
                full="Apollonia Vanova",
                email="apollonia.vanova@watchmen.com",
            ),
            trim=("response.user.firstName", "response.user.lastName", "response.user.contact"),
            scheme=None,
            token_in_url=True,
        ),
        "github": ProviderCase(
            "/user",
            expect(
                "1",
                username="octocat",
                full="monalisa octocat",
                email="octocat@github.com",
                avatar="https://github.com/images/error/octocat_happy.gif",
            ),
            trim=("login", "name", "email", "avatar_url"),
            read_alone=True,
        ),
        "gitlab": ProviderCase(
            "/api/v4/user",
            expect(
                "1",
                username="john_smith",
                full="John Smith",
                email="john@example.com",
                avatar="http://localhost:3000/uploads/user/avatar/1/index.jpg",
            ),
            trim=("name", "username", "email", "avatar_url"),
            read_alone=True,
        ),
        "google": ProviderCase(
            "/v1/userinfo",
            expect(
                "110169484474386276334",
                first="Elisa",
                last="Beckett",
                full="Elisa Beckett",
                email="elisa.beckett@example.com",
                verified=True,
                avatar="https://lh3.googleusercontent.com/a/ACg8ocExampleExampleExample=s96-c",
            ),
            trim=OIDC_TRIM,
            read_alone=True,
        ),
        "heroku": ProviderCase(
            "/account",
            expect(
                "01234567-89ab-cdef-0123-456789abcdef",
                full="Tina Edmonds",
                email="username@example.com",
            ),
            trim=("name", "email"),
        ),
        "hubspot": ProviderCase(
            f"/oauth/v1/access-tokens/{ACCESS_TOKEN}",
            expect("123456", email="user@example.com"),
            trim=("user",),
            token_in_url=True,
            api_url_path="/oauth/v1/access-tokens",
        ),
        "instagram": ProviderCase(
            "/me",
            expect("<IG_ID>", username="<USERNAME>"),
            trim=("username",),
        ),
        "kakao": ProviderCase(
            "/v2/user/me",
            expect(
                "123456789",
                full="\ud64d\uae38\ub3d9",
                email="sample@sample.com",
                verified=True,
                avatar="http://yyy.kakao.com/dn/.../img_640x640.jpg",
            ),
            trim=("kakao_account.profile", "kakao_account.email"),
        ),
        "keycloak": ProviderCase(
            "/realms/demo/protocol/openid-connect/userinfo",
            expect(
                "248289761001",
                username="j.doe",
                first="Jane",
                last="Doe",
                full="Jane Doe",
                email="janedoe@example.com",
                verified=True,
            ),
            trim=OIDC_TRIM,
            read_alone=True,
        ),
        "line": ProviderCase(
            "/v2/profile",
            expect(
                "U4af4980629...",
                full="Brown",
                avatar="https://profile.line-scdn.net/abcdefghijklmn",
            ),
            trim=("displayName", "pictureUrl"),
        ),
        "linkedin": ProviderCase(
            "/v2/userinfo",
            expect(
                "782bbtaQ",
                first="John",
                last="Doe",
                full="John Doe",
                email="doe@email.com",
                verified=True,
                avatar="https://media.licdn-ei.com/dms/image/C5F03AQHqK8v7tB1HCQ/profile-displayphoto-shrink_100_100/0/",
            ),
            trim=OIDC_TRIM,
            read_alone=True,
        ),
        "mastodon": ProviderCase(
            "/api/v1/accounts/verify_credentials",
            expect(
                "14715",
                username="trwnh",
                full="infinite love \u2734",
                avatar="https://files.mastodon.social/accounts/avatars/000/014/715/original/34aa222f4ae2e0a9.png",
            ),
            trim=("display_name", "username", "avatar"),
            read_alone=True,
        ),
        "meetup": ProviderCase(
            "/gql-ext", expect("1234", full="Cool Developer"), trim=("data.self.name",)
        ),
        "microsoft": ProviderCase(
            "/v1.0/me",
            expect(
                "48d31887-5fad-4d73-a9f5-3c356e68a038",
                username="MeganB@contoso.com",
                first="Megan",
                last="Bowen",
                full="Megan Bowen",
                email="MeganB@contoso.com",
            ),
            trim=("displayName", "givenName", "surname", "mail", "userPrincipalName"),
            read_alone=True,
        ),
        "naver": ProviderCase(
            "/v1/nid/me",
            expect(
                "32742776",
                full="\uc624\ud508 API",
                email="openapi@naver.com",
                avatar="https://ssl.pstatic.net/static/pwe/address/nodata_33x33.gif",
            ),
            trim=("response.name", "response.nickname", "response.email", "response.profile_image"),
        ),
        "notion": ProviderCase(
            None,
            expect(
                "3c90c3cc-0d44-4b50-8888-8dd25736052a",
                full="Ada Lovelace",
                email="ada@example.com",
                avatar="https://website.domain/images/avatar.png",
            ),
            token_trim=("owner.user.name", "owner.user.person", "owner.user.avatar_url"),
        ),
        "nylas": ProviderCase(
            "/account",
            expect("<ACCOUNT_ID>", full="<NAME>", email="<EMAIL_ADDRESS>"),
            trim=("name", "email_address"),
        ),
        "okta": ProviderCase(
            "/oauth2/default/v1/userinfo",
            expect(
                "00uid4BxXw6I6TV4m0g3",
                first="John",
                last="Doe",
                full="John Doe",
                email="john.doe@example.com",
                verified=True,
            ),
            trim=OIDC_TRIM,
            read_alone=True,
        ),
        "orcid": ProviderCase(
            "/oauth/userinfo",
            expect("0000-0002-2601-8132", first="Tom", last="Jones", full="Credit Name"),
            trim=("name", "given_name", "family_name"),
            token_trim=("name",),
        ),
        "osm": ProviderCase(
            "/api/0.6/user/details.json",
            expect(
                "22098",
                username="JayStecki",
                avatar="https://master.apis.dev.openstreetmap.org/rails/active_storage/representations/redirect/AVATAR_gitHub_JS2.png",
            ),
            trim=("user.display_name", "user.img"),
        ),
        "osu": ProviderCase(
            "/api/v2/me",
            expect("2", username="peppy", avatar="https://a.ppy.sh/2?1519081077.png"),
            trim=("username", "avatar_url"),
        ),
        "patreon": ProviderCase(
            "/api/oauth2/v2/identity",
            expect(
                "0000000",
                first="Corgi",
                last="The Dev",
                full="Corgi The Dev",
                email="platform@example.com",
                avatar="https://c8.patreon.com/2/200/0000000",
            ),
            trim=("data.attributes",),
            read_alone=True,
        ),
        "paypal": ProviderCase(
            "/v1/identity/openidconnect/userinfo",
            expect(
                "<USER_ID>",
                first="<GIVEN_NAME>",
                last="<FAMILY_NAME>",
                full="<NAME>",
                email="<EMAIL>",
                verified=True,
            ),
            trim=("name", "given_name", "family_name", "email"),
        ),
        "reddit": ProviderCase(
            "/api/v1/me",
            expect(
                "1a2b3c",
                username="example_user",
                avatar="https://styles.redditmedia.com/t5_abc123/styles/profileIcon_snoo1234.png?width=256&height=256&crop=256:256,smart&s=0123456789abcdef",
            ),
            trim=("name", "icon_img", "snoovatar_img"),
            read_alone=True,
        ),
        "salesforce": ProviderCase(
            "/id/00Dx0000000BV7z/005x00000012Q9P",
            expect(
                "005x00000012Q9P",
                username="<USERNAME>",
                first="<FIRST_NAME>",
                last="<LAST_NAME>",
                full="<DISPLAY_NAME>",
                email="<EMAIL>",
            ),
            block=MappingProxyType({"apiURL": None}),
            trim=("username", "first_name", "last_name", "display_name", "email", "photos"),
        ),
        "slack": ProviderCase(
            "/api/openid.connect.userInfo",
            expect(
                "U0R7JM",
                first="Bront",
                last="Labradoodle",
                full="krane",
                email="krane@slack-corp.com",
                verified=True,
                avatar="https://secure.gravatar.com/avatar/example512.png",
            ),
            trim=OIDC_TRIM,
            read_alone=True,
        ),
        "spotify": ProviderCase(
            "/v1/me",
            expect(
                "smedjan",
                full="Jane Listener",
                email="jane.listener@example.com",
                verified=False,
                avatar="https://i.scdn.co/image/ab67757000003b8255c25988a6ac314394d3fbf5",
            ),
            trim=("display_name", "email", "images"),
            read_alone=True,
        ),
        "strava": ProviderCase(
            "/api/v3/athlete",
            expect(
                "1234567890987654321",
                username="marianne_t",
                first="Marianne",
                last="Teutenberg",
                full="Marianne Teutenberg",
                avatar="https://xxxxx.cloudfront.net/pictures/athletes/123456789/123456789/2/large.jpg",
            ),
            token_trim=(
                "athlete.username",
                "athlete.firstname",
                "athlete.lastname",
                "athlete.profile",
                "athlete.profile_medium",
            ),
            read_alone=True,
        ),
        "tiktok": ProviderCase(
            "/v2/user/info/",
            expect("<OPEN_ID>", full="<DISPLAY_NAME>"),
            trim=("data.user.display_name", "data.user.avatar_url"),
        ),
        "twitch": ProviderCase(
            "/helix/users",
            expect(
                "141981764",
                username="twitchdev",
                full="TwitchDev",
                email="not-real@email.com",
                verified=True,
                avatar="https://static-cdn.jtvnw.net/jtv_user_pictures/8a6381c7-d0c0-4576-b179-38bd5ce1d6af-profile_image-300x300.png",
            ),
            trim=(
                "data.0.display_name",
                "data.0.login",
                "data.0.email",
                "data.0.profile_image_url",
            ),
            read_alone=True,
        ),
        "twitter": ProviderCase(
            "/2/users/me",
            expect(
                "2244994945",
                username="XDevelopers",
                full="X Developers",
                avatar="https://pbs.twimg.com/profile_images/1445764922474827784/W2zEPN7U_normal.jpg",
            ),
            trim=("data.name", "data.username", "data.profile_image_url"),
            read_alone=True,
        ),
        "vk": ProviderCase(
            "/method/users.get",
            expect(
                "743784474",
                username="ivan.petrov.example",
                first="Ivan",
                last="Petrov",
                full="Ivan Petrov",
                email="ivan.petrov@example.com",
                avatar="https://sun9-1.userapi.com/s/v1/ig2/example.jpg?size=200x200&quality=95&crop=0,0,400,400&ava=1",
            ),
            trim=(
                "response.0.first_name",
                "response.0.last_name",
                "response.0.photo_200",
                "response.0.screen_name",
            ),
            token_trim=("email",),
            scheme=None,
            read_alone=True,
        ),
        "yahoo": ProviderCase(
            "/openid/v1/userinfo",
            expect(
                "FSVIDUW3D7FSVIDUW3D72F2F",
                first="Jane",
                last="Doe",
                full="Jane Doe",
                email="janedoe@example.com",
                verified=True,
                avatar="https://ct.yimg.com/cy/1768/39361574426_98028a_192sq.jpg",
            ),
            trim=OIDC_TRIM,
            read_alone=True,
        ),
        "yandex": ProviderCase(
            "/info",
            expect(
                "<ID>",
                username="<LOGIN>",
                first="<FIRST_NAME>",
                last="<LAST_NAME>",
                full="<DISPLAY_NAME>",
                email="<EMAIL>",
                avatar="https://avatars.yandex.net/get-yapic/31804/BYkogAC6AoB17bN1HKRFAyKiM4-1/islands-200",
            ),
            trim=(
                "login",
                "first_name",
                "last_name",
                "display_name",
                "real_name",
                "default_email",
                "default_avatar_id",
            ),
            scheme="OAuth",
        ),
        "zoho": ProviderCase(
            "/oauth/user/info",
            expect("123446", first="Jane", last="Doe", full="JaneDoe", email="jane@example.com"),
            trim=("First_Name", "Last_Name", "Display_Name", "Email"),
            scheme="Zoho-oauthtoken",
        ),
        "zoom": ProviderCase(
            "/v2/users/me",
            expect(
                "KDcuGIm1QgePTO8WbOqwIQ",
                first="Jill",
                last="Chill",
                full="Jill Chill",
                email="jchill@example.com",
                verified=True,
                avatar="https://example.com/photo.jpg",
            ),
            trim=("first_name", "last_name", "display_name", "email", "pic_url"),
            read_alone=True,
        ),
    }
)

#: The providers read alone as well as through a whole sign-in (see ``ProviderCase.read_alone``).
READ_ALONE: Final = tuple(sorted(name for name, case in CASES.items() if case.read_alone))
#: The others, run through whole sign-ins only.
ROUTE_ONLY: Final = tuple(sorted(name for name, case in CASES.items() if not case.read_alone))

#: Providers without a profile endpoint, whose whole sign-in is tested in a module of its own.
TESTED_ELSEWHERE: Final = frozenset({"apple", "bluesky"})  # tests/test_apple.py, test_bluesky.py


def adjusted_token(server: FaultServer, name: str) -> Callable[[Any], Any]:
    """Token answers that name an address get the loopback server's."""

    def adjust(token: Any) -> Any:
        if name == "salesforce":
            return {**token, "id": f"{server.url}{CASES[name].api_path}"}
        return token

    return adjust


def one_request(server: FaultServer, path: str = "/token") -> RecordedRequest:
    """The one request ``server`` received for ``path``."""
    found = [request for request in server.requests if request.path == path]
    assert len(found) == 1, f"expected one request to {path}, got {len(found)}"
    return found[0]

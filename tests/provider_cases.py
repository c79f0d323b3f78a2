"""The recorded-answer sign-in cases of the providers issue 14 added (one per provider)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from fault_server import FaultServer, RecordedRequest
from provider_sign_in import ACCESS_TOKEN, SignInCase, expect

OIDC_TRIM: Final = ("name", "given_name", "family_name", "preferred_username", "email", "picture")

SIGN_INS: Final[Mapping[str, SignInCase]] = MappingProxyType(
    {
        "atlassian": SignInCase(
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
        "authentiq": SignInCase(
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
        "azure": SignInCase(
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
        "cognito": SignInCase(
            "/oauth2/userInfo",
            expect("<UUID>", username="<USERNAME>", email="<EMAIL>", verified=True),
            trim=("username", "email"),
        ),
        "foursquare": SignInCase(
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
        "hubspot": SignInCase(
            f"/oauth/v1/access-tokens/{ACCESS_TOKEN}",
            expect("123456", email="user@example.com"),
            trim=("user",),
            token_in_url=True,
            api_url_path="/oauth/v1/access-tokens",
        ),
        "instagram": SignInCase(
            "/me",
            expect("<IG_ID>", username="<USERNAME>"),
            trim=("username",),
        ),
        "kakao": SignInCase(
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
        "line": SignInCase(
            "/v2/profile",
            expect(
                "U4af4980629...",
                full="Brown",
                avatar="https://profile.line-scdn.net/abcdefghijklmn",
            ),
            trim=("displayName", "pictureUrl"),
        ),
        "naver": SignInCase(
            "/v1/nid/me",
            expect(
                "32742776",
                full="\uc624\ud508 API",
                email="openapi@naver.com",
                avatar="https://ssl.pstatic.net/static/pwe/address/nodata_33x33.gif",
            ),
            trim=("response.name", "response.nickname", "response.email", "response.profile_image"),
        ),
        "notion": SignInCase(
            None,
            expect(
                "3c90c3cc-0d44-4b50-8888-8dd25736052a",
                full="Ada Lovelace",
                email="ada@example.com",
                avatar="https://website.domain/images/avatar.png",
            ),
            token_trim=("owner.user.name", "owner.user.person", "owner.user.avatar_url"),
        ),
        "osu": SignInCase(
            "/api/v2/me",
            expect("2", username="peppy", avatar="https://a.ppy.sh/2?1519081077.png"),
            trim=("username", "avatar_url"),
        ),
        "paypal": SignInCase(
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
        "tiktok": SignInCase(
            "/v2/user/info/",
            expect("<OPEN_ID>", full="<DISPLAY_NAME>"),
            trim=("data.user.display_name", "data.user.avatar_url"),
        ),
        "yandex": SignInCase(
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
        "dexcom": SignInCase("/v3/users/self/dataRange", expect("<USER_ID>")),
        "digitalocean": SignInCase(
            "/v2/account",
            expect(
                "b6fr89dbf6d9156cace5f3c78dc9851d957381ef",
                full="Sammy the Shark",
                email="sammy@digitalocean.com",
                verified=True,
            ),
            trim=("account.name", "account.email"),
        ),
        "fitbit": SignInCase(
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
        "heroku": SignInCase(
            "/account",
            expect(
                "01234567-89ab-cdef-0123-456789abcdef",
                full="Tina Edmonds",
                email="username@example.com",
            ),
            trim=("name", "email"),
        ),
        "meetup": SignInCase(
            "/gql-ext", expect("1234", full="Cool Developer"), trim=("data.self.name",)
        ),
        "nylas": SignInCase(
            "/account",
            expect("<ACCOUNT_ID>", full="<NAME>", email="<EMAIL_ADDRESS>"),
            trim=("name", "email_address"),
        ),
        "orcid": SignInCase(
            "/oauth/userinfo",
            expect("0000-0002-2601-8132", first="Tom", last="Jones", full="Credit Name"),
            trim=("name", "given_name", "family_name"),
            token_trim=("name",),
        ),
        "osm": SignInCase(
            "/api/0.6/user/details.json",
            expect(
                "22098",
                username="JayStecki",
                avatar="https://master.apis.dev.openstreetmap.org/rails/active_storage/representations/redirect/AVATAR_gitHub_JS2.png",
            ),
            trim=("user.display_name", "user.img"),
        ),
        "salesforce": SignInCase(
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
        "zoho": SignInCase(
            "/oauth/user/info",
            expect("123446", first="Jane", last="Doe", full="JaneDoe", email="jane@example.com"),
            trim=("First_Name", "Last_Name", "Display_Name", "Email"),
            scheme="Zoho-oauthtoken",
        ),
    }
)


def adjusted_token(server: FaultServer, name: str) -> Callable[[Any], Any]:
    """Token answers that name an address get the loopback server's."""

    def adjust(token: Any) -> Any:
        if name == "salesforce":
            return {**token, "id": f"{server.url}{SIGN_INS[name].api_path}"}
        return token

    return adjust


def one_request(server: FaultServer, path: str = "/token") -> RecordedRequest:
    """The one request ``server`` received for ``path``."""
    found = [request for request in server.requests if request.path == path]
    assert len(found) == 1
    return found[0]

"""Login with Amazon: the customer profile."""

from __future__ import annotations

from typing import ClassVar

from ..profile_fields import ProfileFields
from ..provider import OAuth2Provider


class AmazonProvider(OAuth2Provider):
    """Login with Amazon.

    The profile is ``GET https://api.amazon.com/user/profile`` (scope ``profile``): ``user_id``,
    ``name`` and ``email``. Amazon sends no first/last name and no picture.
    """

    __slots__ = ()

    default_api_url: ClassVar[str | None] = "https://api.amazon.com/user/profile"
    profile_fields: ClassVar[ProfileFields] = ProfileFields(
        provider_key="user_id", full_name="name", email="email"
    )

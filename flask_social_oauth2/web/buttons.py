"""The HTML of the sign-in buttons: a brand's own button where the provider publishes rules for
it, a neutral one otherwise, the Bluesky handle form and Google's markup for its ID-token
sign-in. Plain HTML with ``social-`` classes (``social_oauth2/buttons.css`` styles them through
CSS custom properties); no script of ours.

Every value is escaped here; only the markup built here and the vendored marks are
:class:`~markupsafe.Markup`.

The brand marks come unchanged from two CC0-1.0 icon sets, simple-icons and SVG Logos
(``brand_marks.json``, written by ``tests/vendor_brand_marks.py``, which names each mark's
package, version and icon). The wording and colours follow each brand's published guidelines:

- Google: https://developers.google.com/identity/branding-guidelines ("Sign in with Google";
  light theme: white, #747775 border, #1F1F1F text, the four-colour "G")
- Apple: https://developer.apple.com/design/human-interface-guidelines/sign-in-with-apple
  ("Sign in with Apple"; black, white title and logo)
- Microsoft: https://learn.microsoft.com/entra/identity-platform/howto-add-branding-in-apps
  ("Sign in with Microsoft"; white, #8C8C8C border, #5E5E5E text, the four squares)
- GitHub: https://github.com/logos (the mark unchanged, in one colour; "Sign in with GitHub")
- Facebook: https://developers.facebook.com/docs/facebook-login/userexperience/ ("Continue with
  Facebook"; Facebook blue #0866FF, https://about.meta.com/brand/resources/facebook/logo)
- LinkedIn: https://brand.linkedin.com/ and the "Sign In with LinkedIn" button assets ("Sign in
  with LinkedIn"; LinkedIn blue #0A66C2, the reversed "in")
- Bluesky: https://bsky.social/about/blog/press-faq (the butterfly in #1185FE; "Sign in with
  Bluesky"; on white, since white on #1185FE is below the 4.5:1 contrast of WCAG AA)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from markupsafe import Markup, escape

__all__ = [
    "BRAND_WORDING",
    "GOOGLE_CLIENT_SCRIPT",
    "handle_form",
    "link_button",
    "one_tap_markup",
]

#: The wording of each brand's button, from its guidelines.
BRAND_WORDING: Final[Mapping[str, str]] = {
    "google": "Sign in with Google",
    "apple": "Sign in with Apple",
    "microsoft": "Sign in with Microsoft",
    "github": "Sign in with GitHub",
    "facebook": "Continue with Facebook",
    "linkedin": "Sign in with LinkedIn",
    "bluesky": "Sign in with Bluesky",
}
#: Google Identity Services' client script, which renders Google's button and One Tap.
GOOGLE_CLIENT_SCRIPT: Final = "https://accounts.google.com/gsi/client"


def _load_marks() -> dict[str, str]:
    """Each brand's mark as an inline SVG, decorative (the button's text names the brand)."""
    document = json.loads(Path(__file__).with_name("brand_marks.json").read_text("utf-8"))
    # The vendored paths are trusted data (tests/test_buttons.py holds them to <path> elements).
    return {
        brand: (
            f'<svg class="social-mark" viewBox="{escape(mark["viewBox"])}" width="20"'
            f' height="20" aria-hidden="true" focusable="false">{mark["body"]}</svg>'
        )
        for brand, mark in document["marks"].items()
    }


_MARKS: Final = _load_marks()


def _built(html: str) -> Markup:
    """``html`` built here, every value in it escaped with :func:`~markupsafe.escape` (faster
    than :meth:`Markup.format`, which a page of buttons would feel)."""
    return Markup(html)  # noqa: S704


def _content(brand: str | None, title: str, text: str | None) -> str:
    """The mark (for a brand) and the wording: ``text``, else the brand's, else
    "Sign in with <title>"."""
    wording = text or (BRAND_WORDING[brand] if brand else f"Sign in with {title}")
    label = f'<span class="social-button__text">{escape(wording)}</span>'
    return _MARKS[brand] + label if brand else label


def _classes(brand: str | None) -> str:
    return f"social-button social-button--{brand or 'neutral'}"


def link_button(name: str, brand: str | None, title: str, href: str, text: str | None) -> Markup:
    """A button that is a link to ``href`` (the sign-in route, with its ``next``).

    :param name: The block's name (``data-provider``).
    :param brand: A key of :data:`BRAND_WORDING`, or ``None`` for the neutral button.
    :param title: The provider's title, for the neutral button's wording.
    :param text: Wording that replaces the default (e.g. "Sign up with Google").
    """
    return _built(
        f'<a class="{_classes(brand)}" href="{escape(href)}" data-provider="{escape(name)}">'
        f"{_content(brand, title, text)}</a>"
    )


def handle_form(
    name: str, brand: str | None, title: str, action: str, next_path: str | None, text: str | None
) -> Markup:
    """The form that starts a sign-in from an account's handle (Bluesky's: the route reads
    ``?handle=``): a labelled text field and the button. An empty handle starts at the
    block's own authorization server."""
    field = escape(f"social-handle-{name}")
    hidden = f'<input type="hidden" name="next" value="{escape(next_path)}">' if next_path else ""
    return _built(
        f'<form class="social-handle-form" method="get" action="{escape(action)}"'
        f' data-provider="{escape(name)}">'
        f'<label class="social-handle-form__label" for="{field}">Your {escape(title)}'
        " handle</label>"
        f'<input class="social-handle-form__input" id="{field}" name="handle" type="text"'
        ' autocomplete="username" autocapitalize="none" spellcheck="false"'
        f' placeholder="alice.bsky.social">{hidden}'
        f'<button class="{_classes(brand)}" type="submit">{_content(brand, title, text)}'
        "</button></form>"
    )


def one_tap_markup(
    client_id: str, login_uri: str, nonce: str | None, csp_nonce: str | None
) -> Markup:
    """Google's own markup for a block with ``customProperties.idTokenSignIn``: the
    ``g_id_onload`` settings (One Tap and its FedCM prompt), Google's button, and Google's
    client script, which POSTs the ID token to ``login_uri``.

    :param client_id: The block's ``clientID``.
    :param login_uri: The absolute address of the block's sign-in route.
    :param nonce: The ID token nonce issued to this browser, if any.
    :param csp_nonce: The page's Content-Security-Policy nonce, for the script tag, if any.
    """
    nonce_attribute = Markup(' data-nonce="{}"').format(nonce) if nonce else Markup()
    script_nonce = Markup(' nonce="{}"').format(csp_nonce) if csp_nonce else Markup()
    return Markup(
        '<div id="g_id_onload" data-client_id="{}" data-login_uri="{}"{}'
        ' data-use_fedcm_for_prompt="true"></div>'
        '<div class="g_id_signin social-google-button" data-type="standard"'
        ' data-text="signin_with"></div>'
        '<script src="{}" async{}></script>'
    ).format(client_id, login_uri, nonce_attribute, GOOGLE_CLIENT_SCRIPT, script_nonce)

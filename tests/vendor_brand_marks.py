"""Write ``flask_social_oauth2/web/brand_marks.json``: the brand marks of the sign-in buttons,
taken unchanged from two CC0-1.0 icon sets on npm (none is drawn by hand).

- ``simple-icons`` (https://simpleicons.org, CC0-1.0): Apple, GitHub, Facebook and Bluesky, one
  path each, drawn in the button's text colour (``fill="currentColor"``).
- ``@iconify-json/logos`` (Gil Barbara's SVG Logos, CC0-1.0), for the marks simple-icons does not
  carry or carries in one colour only: Google's four-colour "G" (Google's guidelines ask for it
  in its colours), Microsoft's four squares and LinkedIn's "in" (both removed from
  simple-icons at the brands' request). LinkedIn's one-colour mark is drawn in the button's
  text colour too: white on LinkedIn blue, the reversed "in" its guidelines show on its own
  buttons.

Run it again to update the marks (it runs ``npm pack`` in a temporary folder)::

    python tests/vendor_brand_marks.py
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Final

SIMPLE_ICONS: Final = "simple-icons@16.37.0"
LOGOS: Final = "@iconify-json/logos@1.2.19"
#: brand -> (package, name of the icon in it)
SOURCES: Final = {
    "google": (LOGOS, "google-icon"),
    "apple": (SIMPLE_ICONS, "apple"),
    "microsoft": (LOGOS, "microsoft-icon"),
    "github": (SIMPLE_ICONS, "github"),
    "facebook": (SIMPLE_ICONS, "facebook"),
    "linkedin": (LOGOS, "linkedin-icon"),
    "bluesky": (SIMPLE_ICONS, "bluesky"),
}
#: Marks of one colour from @iconify-json/logos, drawn in the button's text colour.
ONE_COLOUR: Final = {"linkedin"}
TARGET: Final = Path(__file__).resolve().parents[1] / "flask_social_oauth2/web/brand_marks.json"
_SVG: Final = re.compile(r'<svg [^>]*viewBox="(?P<box>[^"]+)"[^>]*>(?P<body>.*)</svg>', re.S)


def simple_icon(svg: str) -> tuple[str, str]:
    """The viewBox and the paths of a simple-icons file, without its ``<title>``, drawn in
    ``currentColor``."""
    found = _SVG.fullmatch(svg.strip())
    if found is None:
        raise ValueError("not a simple-icons SVG")
    body = re.sub(r"<title>.*?</title>", "", found["body"])
    return found["box"], body.replace("<path ", '<path fill="currentColor" ')


def iconify_icon(icon_set: dict[str, Any], name: str) -> tuple[str, str]:
    """The viewBox and the body of icon ``name`` of an Iconify JSON set."""
    icon = icon_set["icons"][name]
    width = icon.get("width", icon_set.get("width", 16))
    height = icon.get("height", icon_set.get("height", 16))
    return f"0 0 {width} {height}", icon["body"]


def unpack(package: str, folder: Path) -> Path:
    folder.mkdir(parents=True)
    subprocess.run(["npm", "pack", package], cwd=folder, check=True, capture_output=True)
    (tarball,) = folder.glob("*.tgz")
    target = folder / "unpacked"
    with tarfile.open(tarball) as archive:
        archive.extractall(target, filter="data")
    tarball.unlink()
    return target / "package"


def main() -> int:
    marks: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as temporary:
        simple = unpack(SIMPLE_ICONS, Path(temporary, "simple"))
        logos = json.loads((unpack(LOGOS, Path(temporary, "logos")) / "icons.json").read_text())
        for brand, (package, name) in SOURCES.items():
            if package == SIMPLE_ICONS:
                box, body = simple_icon((simple / "icons" / f"{name}.svg").read_text())
            else:
                box, body = iconify_icon(logos, name)
                if brand in ONE_COLOUR:
                    body = re.sub(r'fill="#[0-9a-fA-F]+"', 'fill="currentColor"', body)
            marks[brand] = {"source": f"{package} {name}", "viewBox": box, "body": body}
    document = {
        "licence": "CC0-1.0 (public domain): simple-icons and SVG Logos (@iconify-json/logos)",
        "made_by": "tests/vendor_brand_marks.py",
        "marks": marks,
    }
    TARGET.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {TARGET}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

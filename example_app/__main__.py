"""``python -m example_app``: the example app and a local identity provider, on loopback."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Sequence
from urllib.parse import urlsplit

from .serve import DEFAULT_TOKEN_LIFETIME, run_example


def _port(text: str) -> int:
    # ArgumentTypeError, not ValueError: argparse would name this function ("invalid _port
    # value") instead of saying what a port is.
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (a number from 0 to 65535)")
    return value


def _seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 1 to 86400")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Start both servers, print where to go, and serve until Ctrl-C.

    :param argv: The command-line arguments, without the program name.
    :return: The exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m example_app",
        description="Run the flask-social-oauth2 example app with a local identity provider."
        " Both listen on 127.0.0.1 only.",
    )
    parser.add_argument(
        "--port", type=_port, default=5000, help="the app's port (default: %(default)s; 0: any)"
    )
    parser.add_argument(
        "--idp-port",
        type=_port,
        default=5001,
        help="the local identity provider's port (default: %(default)s; 0: any)",
    )
    parser.add_argument(
        "--apple",
        action="store_true",
        help="also start a local Apple-like server for the apple provider (then open the app"
        " at http://localhost:PORT/: Apple's form POST is cross-site)",
    )
    parser.add_argument(
        "--token-lifetime",
        type=_seconds,
        default=DEFAULT_TOKEN_LIFETIME,
        help="seconds the local identity providers' access tokens live, so that the account"
        " page shows a refresh (default: %(default)s)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        with run_example(
            args.port, args.idp_port, apple=args.apple, token_lifetime=args.token_lifetime
        ) as running:
            enabled = list(running.app.extensions["social_oauth2"].providers)
            disabled = running.app.config["EXAMPLE_DISABLED_PROVIDERS"]
            print("flask-social-oauth2 example is running.\n")
            print(f'  Open {running.url} and choose "Local identity provider".\n')
            print(f"  app                 {running.url}")
            print(f"  identity provider   {running.idp.url}/  (any name and e-mail address)")
            if running.idp2 is not None:
                print(f"  second provider     {running.idp2.url}/  (link it on the account page)")
            if running.apple is not None:
                print(f"  Apple (local)       {running.apple.url}/  (signs in as Ada Lovelace)")
                port = urlsplit(running.url).port
                print(f"                      open http://localhost:{port}/ for it (cross-site)")
            if "bluesky" in enabled:
                bluesky = running.app.extensions["social_oauth2"].providers["bluesky"]
                server = urlsplit(bluesky.settings.authorization_url or "").netloc
                print(f"  Bluesky             type your handle on the sign-in page ({server})")
            print(f"  providers           {', '.join(enabled)}")
            for name, variables in disabled.items():
                print(f"  {name + ' (off)':19} set {', '.join(variables)} to turn it on")
            print("\nPress Ctrl-C to stop.", flush=True)
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                print("\nStopped.")
    except OSError as error:
        print(f"Cannot start: {error.strerror}.", file=sys.stderr)
        print("Choose free ports, e.g. --port 8000 --idp-port 8001.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

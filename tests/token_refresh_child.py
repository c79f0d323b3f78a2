"""One process of the two-process refresh test: ``python token_refresh_child.py URL TABLE
COUNTER_FILE START_AT``. Refreshes one identity from 5 threads and prints the access tokens
it got, one a line. Its renewals are appended to COUNTER_FILE."""

from __future__ import annotations

import os
import sys
import threading
import time

from flask import Flask
from helpers import make_token

from flask_social_oauth2.config.settings import OAuth2Info
from flask_social_oauth2.tokens import SQLAlchemyTokenStore


def main() -> None:
    url, table, counter_file, start_at = sys.argv[1:5]
    app = Flask("child")
    app.config["SECRET_KEY"] = "test-secret-key"
    store = SQLAlchemyTokenStore(url, table_name=table)

    def renew(info: OAuth2Info) -> OAuth2Info:
        with open(counter_file, "a") as counter:
            counter.write(f"{os.getpid()} {info.refresh_token}\n")
        time.sleep(0.3)
        return make_token()

    got: list[str] = []

    def refresh() -> None:
        with app.app_context():
            got.append(store.refresh("local", "alice", renew).access_token)

    with app.app_context():
        store.engine.dispose()  # connect now, so both processes start refreshing together
    threads = [threading.Thread(target=refresh) for _ in range(5)]
    time.sleep(max(0.0, float(start_at) - time.time()))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("\n".join(got))


if __name__ == "__main__":
    main()

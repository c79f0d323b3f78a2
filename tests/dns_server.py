"""A real DNS server on loopback (UDP) for the DNS method of AT Protocol handle resolution:
it answers TXT queries from a table, and can stay silent or fail on purpose."""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import Literal

import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

Mode = Literal["answer", "silent", "servfail"]


class DnsServer:
    """``with DnsServer() as server:`` listens on 127.0.0.1 at a free port (``server.address``,
    ``"127.0.0.1:PORT"``) until the block ends.

    ``server.txt[name]`` is the list of TXT texts of ``name`` (no trailing dot); a name not in
    the table is NXDOMAIN. ``server.mode``: ``"answer"``, ``"silent"`` (never answers) or
    ``"servfail"``. ``server.queries`` records each query's name and type."""

    def __init__(self) -> None:
        self.txt: dict[str, list[str]] = {}
        self.mode: Mode = "answer"
        self.queries: list[tuple[str, str]] = []
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.1)
        self.port: int = self._socket.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> DnsServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self._socket.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            query = dns.message.from_wire(data)
            (question,) = query.question
            name = question.name.to_text(omit_final_dot=True)
            self.queries.append((name, dns.rdatatype.to_text(question.rdtype)))
            if self.mode == "silent":
                continue
            answer = dns.message.make_response(query)
            texts = self.txt.get(name)
            if self.mode == "servfail":
                answer.set_rcode(dns.rcode.SERVFAIL)
            elif texts is None:
                answer.set_rcode(dns.rcode.NXDOMAIN)
            elif question.rdtype == dns.rdatatype.TXT:
                quoted = [
                    '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"' for text in texts
                ]
                answer.answer.append(
                    dns.rrset.from_text(question.name, 300, dns.rdataclass.IN, "TXT", *quoted)
                )
            self._socket.sendto(answer.to_wire(), peer)

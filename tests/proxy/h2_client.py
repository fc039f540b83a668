"""A raw HTTP/2 client of an operator proxy, frame by frame (h2 over a TLS socket), for the tests
that need what a kubernetes client never does: a small flow-control window, stream resets,
header values h2 would refuse to send (``import h2_client``: this folder is on ``sys.path``)."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable

import h2.config
import h2.connection
import h2.events
import h2.settings

from ktest.base.kubeconfig import credentials_directory
from ktest.proxy import OperatorProxy


def client_context(proxy: OperatorProxy, alpn: str) -> ssl.SSLContext:
    """TLS as the proxy's own kubeconfig describes it (its CA, its client certificate)."""
    assert proxy.kubeconfig is not None
    files = credentials_directory(proxy.kubeconfig)
    context = ssl.create_default_context(cafile=str(files / "ca.crt"))
    context.load_cert_chain(files / "client.crt", files / "client.key")
    context.set_alpn_protocols([alpn])
    return context


class RawH2Client:
    """One HTTP/2 connection to ``proxy``. ``window``: the initial stream window it announces;
    ``check_outbound=False`` sends header values as given, as a hostile or broken client would."""

    def __init__(
        self, proxy: OperatorProxy, *, window: int | None = None, check_outbound: bool = True
    ) -> None:
        raw = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        self.sock = client_context(proxy, "h2").wrap_socket(raw, server_hostname="127.0.0.1")
        assert self.sock.selected_alpn_protocol() == "h2"
        config = h2.config.H2Configuration(
            client_side=True,
            validate_outbound_headers=check_outbound,
            normalize_outbound_headers=check_outbound,
        )
        self.h2 = h2.connection.H2Connection(config)
        self.h2.initiate_connection()
        if window is not None:
            self.h2.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.sock.sendall(self.h2.data_to_send())
        self.status: dict[int, str] = {}
        self.body: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.reset: dict[int, int] = {}
        self.terminated: h2.events.ConnectionTerminated | None = None
        self.window_updates_sent = 0

    def get(self, path: str, extra: tuple[tuple[str, str], ...] = ()) -> int:
        stream = self.h2.get_next_available_stream_id()
        headers = [(":method", "GET"), (":scheme", "https"), (":authority", "127.0.0.1"), (":path", path)]
        self.h2.send_headers(stream, [*headers, ("accept", "application/json"), *extra], end_stream=True)
        self.sock.sendall(self.h2.data_to_send())
        self.body[stream] = bytearray()
        return stream

    def cancel(self, stream: int) -> None:
        self.h2.reset_stream(stream)
        self.sock.sendall(self.h2.data_to_send())

    def receive_until(self, done: Callable[[], bool]) -> bool:
        """Read frames until ``done()``; False if the proxy closed the connection first."""
        deadline = time.monotonic() + 10
        while not done():
            assert time.monotonic() < deadline, "no answer from the proxy within 10 s"
            data = self.sock.recv(65536)
            if not data:
                return False
            for event in self.h2.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    self.status[event.stream_id] = dict(event.headers)[b":status"].decode()
                elif isinstance(event, h2.events.DataReceived):
                    self.body[event.stream_id] += event.data
                    # opened only as far as read, so a long answer needs several WINDOW_UPDATEs
                    self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    self.window_updates_sent += 1
                elif isinstance(event, h2.events.StreamEnded):
                    self.ended.add(event.stream_id)
                elif isinstance(event, h2.events.StreamReset):
                    self.reset[event.stream_id] = event.error_code
                elif isinstance(event, h2.events.ConnectionTerminated):
                    self.terminated = event
            self.sock.sendall(self.h2.data_to_send())
        return True

    def until(self, done: Callable[[], bool]) -> None:
        assert self.receive_until(done), "the proxy closed the connection"

    def answer(self, stream: int) -> tuple[str, bytes] | None:
        """The stream's status and body once it ended; None if the proxy ended the connection."""
        self.receive_until(lambda: stream in self.ended or self.terminated is not None)
        if stream not in self.ended:
            return None
        return self.status[stream], bytes(self.body[stream])

    def close(self) -> None:
        self.sock.close()

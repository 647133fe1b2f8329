"""A forwarding TCP proxy a test can cut: every open connection reset at
once, new ones still taken."""

import socket
import threading
from urllib.parse import urlsplit


class Proxy:
    def __init__(self, to_url: str) -> None:
        u = urlsplit(to_url)
        self.to = (u.hostname, u.port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"{u.scheme}://127.0.0.1:{self.listener.getsockname()[1]}"
        self.open = []
        self.lock = threading.Lock()
        self.cuts = 0
        self.connections = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.to)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.connections += 1
                self.open += [client, up]
            for a, b in ((client, up), (up, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        with self.lock:
            socks, self.open = self.open, []
            self.cuts += 1
        for s in socks:
            # shutdown wakes the pump blocked on it (a close alone would
            # not) and ends the connection at once.
            for step in (lambda: s.shutdown(socket.SHUT_RDWR), s.close):
                try:
                    step()
                except OSError:
                    pass

    def __enter__(self) -> "Proxy":
        return self

    def __exit__(self, *exc) -> None:
        self.closed = True
        self.listener.close()
        self.cut()

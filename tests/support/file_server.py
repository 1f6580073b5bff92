"""A file server on 127.0.0.1 for download tests: serves copies of files, and misbehaves on request.

``FileServer(files)`` maps URL paths to bytes.  A path under ``/corrupt/`` serves the bytes with one flipped,
``/truncated/`` announces the full length but sends half and hangs up, ``/short/`` sends half with an honest
length, ``/long/`` sends the bytes twice; anything else unknown is a 404.  ``hits`` counts requests per path.
"""
from __future__ import annotations

import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FileServer:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.hits: Counter[str] = Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server name)
                server.hits[self.path] = server.hits[self.path] + 1
                mode, _, rest = self.path.lstrip("/").partition("/")
                body = server.files.get("/" + rest) if mode in ("corrupt", "truncated", "short", "long") else None
                if body is None:
                    mode, body = "plain", server.files.get(self.path)
                if body is None:
                    self.send_error(404, "not found")
                    return
                length = len(body)
                if mode == "corrupt":
                    body = bytes([body[0] ^ 0xFF]) + body[1:]
                elif mode in ("truncated", "short"):
                    body = body[: len(body) // 2]
                    length = length if mode == "truncated" else len(body)
                elif mode == "long":
                    body, length = body + body, 2 * length
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                if mode == "truncated":
                    self.close_connection = True

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def url(self, path: str, mode: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{'/' + mode if mode else ''}{path}"

    def __enter__(self) -> "FileServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def closed_port_url(path: str = "/file") -> str:
    """A URL on 127.0.0.1 where nothing listens: a download from it fails as it would offline."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"

"""A webhook receiver for the notification tests: appends the body of
each POST (one JSON message) as a line to a file, and answers 200.

usage: receiver.py PORT FILE [CERT KEY]   (with CERT and KEY: HTTPS)
"""
import http.server
import ssl
import sys

PORT, OUT = int(sys.argv[1]), sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(n)
        with open(OUT, "ab") as f:
            f.write(body.replace(b"\n", b" ") + b"\n")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
if len(sys.argv) == 5:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print("listening", flush=True)
server.serve_forever()

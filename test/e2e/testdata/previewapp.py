# The app that test/e2e's preview tests run inside a sandbox (stdlib only).
# Port argv[1] serves HTTP on 127.0.0.1 only, so that only the agent's
# loopback dial reaches it: / (a page that loads /app.js and talks to
# /ws), /headers (the request as the app saw it, as JSON), /answer (the
# headers the query asks for: a hostile app's answer), /sse (two events two seconds
# apart), /big?n=BYTES (that many bytes) and /ws (a WebSocket that answers
# a text with "echo:" and the text reversed, so an echo cannot be made up
# by the page; the page's ?ws= names another WebSocket to open, and it
# shows "closed" when its WebSocket closed with no echo). Port argv[2]
# accepts connections and never answers.
import base64, hashlib, json, socket, struct, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PAGE = b"""<!doctype html><title>preview app</title><div id="status">loading</div><div id="origin"></div><div id="script">not loaded</div><div id="echo"></div>
<script src="app.js"></script>
<script>
const msg = new URLSearchParams(location.search).get("msg") || "hello";
const u = new URL(new URLSearchParams(location.search).get("ws") || "ws", location.href);
u.protocol = u.protocol.replace("http", "ws");
document.getElementById("origin").textContent = self.origin;
const ws = new WebSocket(u);
ws.onopen = () => { document.getElementById("status").textContent = "open"; ws.send(msg); };
ws.onmessage = (e) => { document.getElementById("echo").textContent = e.data; };
ws.onclose = () => { if (!document.getElementById("echo").textContent) document.getElementById("echo").textContent = "closed"; };
</script>"""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, ctype, body):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/":
            self.reply(200, "text/html; charset=utf-8", PAGE)
        elif url.path == "/app.js":
            self.reply(200, "text/javascript", b'document.getElementById("script").textContent = "loaded";')
        elif url.path == "/headers":
            seen = {"path": self.path, "headers": [[k, v] for k, v in self.headers.items()]}
            self.reply(200, "application/json", json.dumps(seen).encode())
        elif url.path == "/answer":
            # A hostile answer: each query parameter but status and fill
            # (an X-Fill header of that many bytes) is a header of the
            # answer, as the test asks.
            q = parse_qs(url.query)
            self.send_response(int(q.pop("status", ["200"])[0]))
            fill = int(q.pop("fill", ["0"])[0])
            if fill:
                self.send_header("X-Fill", "x" * fill)
            for k, vs in q.items():
                for v in vs:
                    self.send_header(k, v)
            self.send_header("Content-Length", "2")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"ok")
        elif url.path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(2):
                self.wfile.write(b"data: event-%d\n\n" % i)
                self.wfile.flush()
                time.sleep(2)
        elif url.path == "/big":
            n = int(parse_qs(url.query)["n"][0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[: min(n, len(chunk))])
                n -= len(chunk)
        elif url.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            self.websocket()
        else:
            self.reply(404, "text/plain", b"no such page\n")

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept.decode())
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            op, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", self.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if op == 8:
                self.frame(8, data[:2])
                return
            if op == 9:
                self.frame(10, data)
            elif op == 1:
                self.frame(1, b"echo:" + data.decode()[::-1].encode())

    def frame(self, op, data):
        n = len(data)
        head = bytes([0x80 | op]) + (bytes([n]) if n < 126 else b"\x7e" + struct.pack(">H", n))
        self.wfile.write(head + data)
        self.wfile.flush()


def silent(port):
    # Accepts and holds every connection, and never answers any.
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1024)
    held = []
    while True:
        held.append(s.accept()[0])


threading.Thread(target=silent, args=(int(sys.argv[2]),), daemon=True).start()
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()

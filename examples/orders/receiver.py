#!/usr/bin/env python3
"""A local HTTP receiver for the orders example. `start` launches it in the
background (its own session, so it outlives the node's process group),
waits for its port and leaves {"port": N} as the node's output. It answers
GET /health, stores POST /orders/DAY bodies under
$WEIR_DATA/orders/received/, and exits after a minute without requests."""
import http.server, json, os, subprocess, sys, time

IDLE_SECS = 60

if sys.argv[1] == "start":
    port_file = os.path.join(os.environ["WEIR_DATA"], "orders", f"receiver-{os.getpid()}.port")
    os.makedirs(os.path.dirname(port_file), exist_ok=True)
    subprocess.Popen([sys.executable, __file__, "serve", port_file], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(port_file):
            with open(port_file) as f:
                port = int(f.read())
            os.remove(port_file)
            with open(os.environ["WEIR_OUTPUT"], "w") as f:
                json.dump({"port": port}, f)
            print(f"receiver listening on 127.0.0.1:{port}")
            sys.exit(0)
        time.sleep(0.05)
    sys.exit("the receiver did not start")

folder = os.path.join(os.environ["WEIR_DATA"], "orders", "received")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.last = time.time()
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def do_POST(self):
        self.server.last = time.time()
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        day = self.path.rsplit("/", 1)[-1]
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, day + ".json"), "wb") as f:
            f.write(body)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"stored": day, "regions": len(json.loads(body))}).encode())

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
server.timeout = 1
server.last = time.time()
tmp = sys.argv[2] + ".tmp"
with open(tmp, "w") as f:
    f.write(str(server.server_address[1]))
os.replace(tmp, sys.argv[2])
while time.time() - server.last < IDLE_SECS:
    server.handle_request()

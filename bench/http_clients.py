"""The interpreter's CPU per upstream call: httpx, urllib3 and pycurl, against one stand-in.

Not in `make bench`: `python -m bench.http_clients [--calls 3000]` prints JSON. A local
HTTP/1.1 server in a process of its own answers a J-SHIS-sized JSON (small) and a
tile-sized body (20 KiB); four threads call it through each client in turn, keeping their
connections alive, and the figure is this process's CPU (every thread) per call. The
choice of app/assessment/sources/http.py's client was made by it (bench/ZONES.md).
"""

import io
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

SERVER = """
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
SMALL = b'{"status":"Success","features":[{"properties":{"T30_I55_PS":"0.123456"}}]}'
BIG = bytes(range(256)) * 80
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = BIG if "big" in self.path else SMALL
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def clients() -> dict:
    """Return each client's GET, pooled as the app would pool it."""
    import httpx
    import pycurl
    import urllib3

    pooled = httpx.Client(limits=httpx.Limits(max_connections=64, max_keepalive_connections=16))
    manager = urllib3.PoolManager(maxsize=16, retries=False, timeout=urllib3.Timeout(10))
    mine = threading.local()

    def with_httpx(url: str) -> bytes:
        return pooled.get(url, timeout=10).content

    def with_urllib3(url: str) -> bytes:
        return manager.request("GET", url).data

    def with_pycurl(url: str) -> bytes:
        if getattr(mine, "handle", None) is None:
            mine.handle = pycurl.Curl()
            mine.handle.setopt(pycurl.NOSIGNAL, 1)
        body = io.BytesIO()
        mine.handle.setopt(pycurl.URL, url)
        mine.handle.setopt(pycurl.WRITEDATA, body)
        mine.handle.perform()
        return body.getvalue()

    return {"httpx": with_httpx, "urllib3": with_urllib3, "pycurl": with_pycurl}


def run(calls: int = 3000, rounds: int = 2) -> dict:
    """Return the CPU microseconds per call of each client and body, per round."""
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    out: dict = {}
    try:
        for _ in range(rounds):
            for body in ("small", "big"):
                for name, get in clients().items():
                    urls = [f"http://127.0.0.1:{port}/{body}?meshcode={i}" for i in range(calls)]
                    for url in urls[:50]:  # connections opened before the clock starts
                        get(url)
                    cpu = time.process_time()
                    with ThreadPoolExecutor(4) as pool:
                        list(pool.map(get, urls))
                    used = (time.process_time() - cpu) / calls * 1e6
                    out.setdefault(f"{name} {body}", []).append(round(used, 1))
    finally:
        server.kill()
    return {"cpu_us_per_call": out}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    print(json.dumps(run(parser.parse_args().calls), indent=2))

#!/usr/bin/python3
"""cdp.py — drive Debian's chromium headless through the DevTools protocol, with a
minimal websocket client written on the standard library (RFC 6455: masked text
frames out, fragmented frames, ping and close in). Used by tests/test_view.py; also a
tool to take a screenshot of a page:

    /usr/bin/python3 tests/cdp.py URL OUT.png [--width 1500 --height 1000] [--wait-ready]
"""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio"]


class WebSocket:
    """A client websocket over a plain TCP socket (ws:// only)."""

    def __init__(self, url, timeout=120):
        assert url.startswith("ws://"), url
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key))
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise ConnectionError("websocket handshake refused: %r" % status)

    def _read(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("websocket closed")
            out += chunk
        return out

    def send(self, text):
        data = text.encode()
        head = bytes([0x81])
        n = len(data)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + body)

    def recv(self):
        """The next text message (continuation frames joined; pings answered)."""
        parts = []
        while True:
            b0, b1 = self._read(2)
            fin, op = b0 & 0x80, b0 & 0x0F
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if op == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if op == 0x9:  # ping -> pong
                self.sock.sendall(bytes([0x8A, 0x80 | len(data)]) + b"\0\0\0\0" + data)
                continue
            if op in (0x1, 0x2, 0x0):
                parts.append(data)
                if fin:
                    return b"".join(parts).decode()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Browser:
    """A headless chromium with one page, driven over the DevTools protocol. Console
    errors, uncaught exceptions and failed loads are collected in self.errors."""

    def __init__(self, width=1500, height=1000):
        exe = shutil.which("chromium")
        if not exe:
            raise RuntimeError("chromium is not installed (scripts/deps.sh installs it)")
        self.profile = tempfile.mkdtemp(prefix="dfl_chromium_")
        self.proc = subprocess.Popen([exe, *CHROMIUM_FLAGS, "--user-data-dir=" + self.profile,
                                      "--remote-debugging-port=0", "--window-size=%d,%d" % (width, height),
                                      "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 120
        text = ""
        while text.count("\n") < 1:
            if self.proc.poll() is not None or time.time() > deadline:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
            if os.path.exists(port_file):
                with open(port_file) as f:
                    text = f.read()
        port = int(text.split()[0])
        pages = []
        while not pages:
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port) as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            if not pages:
                time.sleep(0.05)
        self.ws = WebSocket(pages[0]["webSocketDebuggerUrl"])
        self.next_id = 0
        self.errors = []
        for m in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(m)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _event(self, msg):
        m, p = msg.get("method"), msg.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append("exception: %s %s" % (d.get("text"), d.get("exception", {}).get("description", "")))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console.%s: %s" % (p["type"], " ".join(str(a.get("value", a.get("description")))
                                                                     for a in p.get("args", []))))
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            self.errors.append("log: %s %s" % (p["entry"].get("text"), p["entry"].get("url", "")))

    def call(self, method, params=None):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            self._event(msg)

    def eval(self, expr):
        """The value of a JavaScript expression (promises awaited)."""
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"].get("exception", {}).get("description")))
        return r["result"].get("value")

    def wait(self, expr, timeout=120, what=None):
        """Poll until expr is truthy; returns its value. The timeout only keeps a broken
        page from hanging the suite; it is not a speed limit."""
        deadline = time.time() + timeout
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.time() > deadline:
                raise AssertionError("waited %d s for %s" % (timeout, what or expr))
            time.sleep(0.05)

    def navigate(self, url):
        self.call("Page.navigate", {"url": url})

    def mouse(self, kind, x, y, **kw):
        p = {"type": kind, "x": x, "y": y}
        p.update(kw)
        self.call("Input.dispatchMouseEvent", p)

    def click(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", buttons=0, clickCount=1)

    def wheel(self, x, y, dy):
        self.mouse("mouseWheel", x, y, deltaX=0, deltaY=dy)

    def screenshot(self, path):
        data = base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"})["data"])
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)

    def close(self):
        if getattr(self, "ws", None):
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="Screenshot a page with headless chromium.")
    ap.add_argument("url")
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=1500)
    ap.add_argument("--height", type=int, default=1000)
    ap.add_argument("--wait-ready", action="store_true",
                    help="wait for document.body.dataset.ready and every tile (bin/view pages)")
    ap.add_argument("--eval", action="append", default=[], help="JavaScript to run before the shot")
    a = ap.parse_args(argv)
    b = Browser(a.width, a.height)
    try:
        b.navigate(a.url)
        if a.wait_ready:
            b.wait("document.body && document.body.dataset.ready === '1' && window.dlv.tilesLoaded()")
        for e in a.eval:
            b.eval(e)
            if a.wait_ready:
                time.sleep(0.3)
                b.wait("window.dlv.tilesLoaded()")
        time.sleep(0.3)
        b.screenshot(a.out)
        for e in b.errors:
            print("page error:", e, file=sys.stderr)
    finally:
        b.close()
    return 1 if b.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

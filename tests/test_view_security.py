#!/usr/bin/python3
"""test_view_security.py — bin/view against the web (issue 24): only a Host header that
names the address bound is answered (DNS rebinding), 421 otherwise; a request without
Host only in HTTP/1.0; 100 slow clients that send one header byte at a time do not keep
a normal request from being answered, and a connection that trickles its headers is
closed after the header deadline although every byte would restart microhttpd's own
timeout; a read that fails in the viewer's threads answers one whole sentence and
leaves no HDF5 error stack on stderr. Loopback only; every loop is bounded.

Run from the repo root:  /usr/bin/python3 tests/test_view_security.py   (BIN=bin)
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "ref"))
import make_model  # noqa: E402

import h5py  # noqa: E402

BIN = os.environ.get("BIN", "bin")
PROBE = os.path.join(BIN, "probe")
VIEW = os.path.join(BIN, "view")
CLIENT_TIMEOUT = 60   # on the client's sockets only, so that a broken server cannot hang the test


def start(*args):
    """bin/view on a free port; (process, host, port)."""
    p = subprocess.Popen([VIEW, *args, "--port", "0", "--quiet"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    url = p.stdout.readline().strip()
    if not url.startswith("http://"):
        p.kill()
        raise AssertionError("view did not print its URL: %r %s" % (url, p.stderr.read()))
    host, port = url[len("http://"):].rstrip("/").rsplit(":", 1)
    return p, host.strip("[]"), int(port)


def raw(host, port, request):
    """Send request bytes, read the whole answer (the server closes: Connection: close);
    (status, body)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(CLIENT_TIMEOUT)
        s.connect((host, port))
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else None
    return status, body


def get(host, port, path="/api/dumps", hosthdr=None, version="HTTP/1.1"):
    lines = ["GET %s %s" % (path, version)]
    if hosthdr is not None:
        lines.append("Host: " + hosthdr)
    lines.append("Connection: close")
    return raw(host, port, ("\r\n".join(lines) + "\r\n\r\n").encode())


class Fixture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for b in (PROBE, VIEW):
            if not os.access(b, os.X_OK):
                raise AssertionError("no %s (run make first)" % b)
        cls.root = tempfile.mkdtemp(prefix="dfl_viewsec_")
        model = os.path.join(cls.root, "m")
        make_model.make_model(model, "diff_transformer", layers=1, hidden=16, heads=2, ffn=24, vocab=64,
                              max_pos=128, seed=2)
        prompts = os.path.join(cls.root, "p.jsonl")
        with open(prompts, "w") as f:
            for i in range(2):
                f.write(json.dumps({"id": "s%d" % i, "tokens": [0] + [5 + (i + j) % 50 for j in range(47)],
                                    "answer": [[3, 5]]}) + "\n")
        cls.dump = os.path.join(cls.root, "d.h5")
        r = subprocess.run([PROBE, "--model", model, "--prompts", prompts, "--out", cls.dump, "--maps", "all",
                            "--quiet"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        cls.procs = []

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            p.terminate()
            p.communicate(timeout=60)
        shutil.rmtree(cls.root)

    @classmethod
    def server(cls, *args):
        p, host, port = start(*args)
        cls.procs.append(p)
        return p, host, port


class HostHeader(Fixture):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.p, cls.host, cls.port = cls.server(cls.dump)

    def test_names_of_this_server_are_answered(self):
        P = self.port
        for h in ("127.0.0.1:%d" % P, "localhost:%d" % P, "LocalHost:%d" % P, "[::1]:%d" % P,
                  "[0:0:0:0:0:0:0:1]:%d" % P):
            with self.subTest(host=h):
                code, body = get(self.host, P, hosthdr=h)
                self.assertEqual(code, 200, body)
                self.assertIn("dumps", json.loads(body))

    def test_other_names_get_421(self):
        P = self.port
        for h in ("evil.example", "evil.example:%d" % P, "localhost.evil.example:%d" % P, "127.0.0.1",
                  "127.0.0.1:%d" % (P + 1 if P < 65535 else P - 1), "127.0.0.2:%d" % P, "[::2]:%d" % P,
                  "[::1:%d" % P, "[::1]x%d" % P, "localhost:%d0" % P, "localhost:+%d" % P, "",
                  "127.0.0.1:%d@evil.example" % P, "0x7f.1:%d" % P):
            with self.subTest(host=h):
                for version in ("HTTP/1.1", "HTTP/1.0"):
                    code, body = get(self.host, P, hosthdr=h, version=version)
                    self.assertEqual(code, 421, body)
                    msg = json.loads(body)["error"]
                    self.assertIn("answers only to 127.0.0.1:%d, localhost:%d, [::1]:%d" % (P, P, P), msg)

    def test_missing_host(self):
        """HTTP/1.0 without Host is answered (no browser omits it, and only a browser
        can be made to send a rebound name); HTTP/1.1 without Host is not."""
        code, body = get(self.host, self.port, version="HTTP/1.0")
        self.assertEqual(code, 200, body)
        code, body = get(self.host, self.port, version="HTTP/1.1")
        self.assertEqual(code, 421, body)

    def test_page_and_head_follow_the_same_rule(self):
        code, _ = raw(self.host, self.port, b"GET / HTTP/1.1\r\nHost: evil.example:%d\r\nConnection: close\r\n\r\n"
                      % self.port)
        self.assertEqual(code, 421)
        code, _ = raw(self.host, self.port, b"GET / HTTP/1.1\r\nHost: localhost:%d\r\nConnection: close\r\n\r\n"
                      % self.port)
        self.assertEqual(code, 200)
        code, body = raw(self.host, self.port, b"HEAD /api/dumps HTTP/1.1\r\nHost: evil.example\r\n"
                         b"Connection: close\r\n\r\n")
        self.assertEqual((code, body), (421, b""))

    def test_bound_address(self):
        """Bound to 127.0.0.2, that address is a name of the server too; 127.0.0.3 is not."""
        _, host, port = self.server(self.dump, "--bind", "127.0.0.2")
        self.assertEqual(host, "127.0.0.2")
        self.assertEqual(get(host, port, hosthdr="127.0.0.2:%d" % port)[0], 200)
        self.assertEqual(get(host, port, hosthdr="127.0.0.1:%d" % port)[0], 200)
        self.assertEqual(get(host, port, hosthdr="127.0.0.3:%d" % port)[0], 421)

    def test_ipv6_bound(self):
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", 0))
        except OSError as e:
            raise AssertionError("this machine has no IPv6 loopback: %s" % e)
        _, host, port = self.server(self.dump, "--bind", "::1")
        self.assertEqual(get(host, port, hosthdr="[::1]:%d" % port)[0], 200)
        self.assertEqual(get(host, port, hosthdr="evil.example:%d" % port)[0], 421)


class SlowClients(Fixture):
    def slow(self, port, n):
        """n connections that have each sent the first byte of a request line."""
        socks = []
        for _ in range(n):
            s = socket.socket()
            s.settimeout(CLIENT_TIMEOUT)
            try:
                s.connect(("127.0.0.1", port))
                s.send(b"G")
            except OSError:
                pass   # refused or closed by the server: that is its right
            socks.append(s)
        return socks

    def test_normal_request_answered_beside_100_slow_clients(self):
        _, host, port = self.server(self.dump)
        socks = self.slow(port, 100)
        stop = threading.Event()

        def trickle():
            msg = b"ET /api/dumps HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 64
            for i in range(len(msg)):
                if stop.wait(1.0):
                    return
                for s in socks:
                    try:
                        s.send(msg[i:i + 1])
                    except OSError:
                        pass
        t = threading.Thread(target=trickle)
        t.start()
        try:
            time.sleep(1.0)   # the slow ones are all connected and sending
            code, body = get(host, port, hosthdr="127.0.0.1:%d" % port)
            self.assertEqual(code, 200, body)
            self.assertIn("dumps", json.loads(body))
        finally:
            stop.set()
            t.join()
            for s in socks:
                s.close()

    def test_trickled_headers_are_cut_off(self):
        """One byte every half second would keep a connection forever under an idle
        timeout; the header deadline (10 s) closes it. Bounded: 120 bytes at most."""
        _, host, port = self.server(self.dump)
        s = socket.socket()
        s.settimeout(CLIENT_TIMEOUT)
        s.connect(("127.0.0.1", port))
        msg = b"GET /api/dumps HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Slow: " % port + b"a" * 120
        closed_after = None
        try:
            for i in range(len(msg)):
                try:
                    s.send(msg[i:i + 1])
                except OSError:
                    closed_after = i
                    break
                s.settimeout(0.5)
                try:
                    if s.recv(4096) == b"":
                        closed_after = i
                        break
                except socket.timeout:
                    pass
                except OSError:
                    closed_after = i
                    break
        finally:
            s.close()
        self.assertIsNotNone(closed_after, "the server kept a connection that sent %d header bytes slowly" % len(msg))
        # and the server still answers
        self.assertEqual(get(host, port, hosthdr="127.0.0.1:%d" % port)[0], 200)


class FailedRead(Fixture):
    def test_one_sentence_and_no_hdf5_stack(self):
        """A map whose first chunk fails its Fletcher32 checksum: the viewer's request
        thread reads it through HDF5, which fails; the answer is one whole sentence
        with HDF5's reason, and stderr holds no HDF5 error stack."""
        bad = os.path.join(self.root, "bad.h5")
        shutil.copy(self.dump, bad)
        with h5py.File(bad, "r+") as f:
            g = f["samples/000000/attn"]
            data = g["map1"][...]
            scales = [g[n] for n in ("layers", "heads", "rows", "keys")]
            del g["map1"]
            d = g.create_dataset("map1", data=data, chunks=(1, 1, data.shape[2], data.shape[3]), fletcher32=True)
            for i, sc in enumerate(scales):
                d.dims[i].attach_scale(sc)
            off = d.id.get_chunk_info(0).byte_offset
        with open(bad, "r+b") as f:
            f.seek(off + 10)
            b = f.read(1)
            f.seek(off + 10)
            f.write(bytes([b[0] ^ 0xFF]))
        p, host, port = start(bad)
        try:
            code, body = get(host, port, "/api/limits?d=0&s=0&l=0&h=0&m=map1", hosthdr="127.0.0.1:%d" % port)
            self.assertGreaterEqual(code, 500, body)
            msg = json.loads(body)["error"]
            self.assertEqual(msg, "%s: samples/000000/attn/map1: HDF5 failed to read a hyperslab "
                             "(data error detected by Fletcher32 checksum)" % bad)
            code, body = get(host, port, "/api/cell?d=0&s=0&l=0&h=0&q=40&k=2", hosthdr="127.0.0.1:%d" % port)
            self.assertGreaterEqual(code, 500, body)
        finally:
            p.terminate()
            _, err = p.communicate(timeout=60)
        self.assertNotIn("HDF5-DIAG", err)
        self.assertEqual(err.strip(), "", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)

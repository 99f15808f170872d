"""Test support: a real dpbudgetd on an ephemeral loopback port with a data directory of
its own, and a TCP proxy that injects faults between the client and the daemon."""
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

DAEMON = None  # set by run_tests.py: the dpbudgetd binary


class Daemon:
    """dpbudgetd --port 0 with a temporary data directory; stop() ends it and removes it."""

    def __init__(self, *extra, scheme="http", tmp=None):
        if DAEMON is None:
            raise RuntimeError("no daemon binary (run through run_tests.py DPBUDGETD)")
        self.tmp = tmp or tempfile.mkdtemp(prefix="dpb-sdk-")
        self.own_tmp = tmp is None
        port_file = os.path.join(self.tmp, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log = open(os.path.join(self.tmp, "daemon.log"), "a")
        env = {k: v for k, v in os.environ.items() if not k.startswith("DPBUDGET_")}
        self.proc = subprocess.Popen(
            [DAEMON, "--listen", "127.0.0.1", "--port", "0", "--port-file", port_file,
             "--data-dir", os.path.join(self.tmp, "data"), "--no-request-log"] + list(extra),
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 15
        while time.time() < deadline:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    p = f.read().strip()
                if p.isdigit():
                    self.port = int(p)
                    self.url = "%s://127.0.0.1:%d" % (scheme, self.port)
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("dpbudgetd did not start: see %s/daemon.log" % self.tmp)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def cpu_seconds(self):
        """The daemon's user + system CPU seconds so far (Linux /proc), or None."""
        try:
            with open("/proc/%d/stat" % self.proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def stop(self, keep=False):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        if self.own_tmp and not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


class FaultProxy:
    """A TCP proxy on an ephemeral port in front of (host, port). `faults` is a list of
    what to do with the next connections, one entry per connection, then pass through:
      "pass"            forward both ways
      "drop_request"    read the request, close without forwarding it (never applied)
      "drop_response"   forward the request, read the daemon's whole answer, close
                        without passing it on (applied, but the client never hears)
      "hang"            accept and never answer (the client times out)
    Each connection carries one exchange in the fault modes. `seen` counts connections."""

    def __init__(self, port, faults=()):
        self.target = ("127.0.0.1", port)
        self.faults = list(faults)
        self.seen = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.stopped = False
        self.hung = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.seen += 1
                mode = self.faults.pop(0) if self.faults else "pass"
            threading.Thread(target=self._serve, args=(c, mode), daemon=True).start()

    @staticmethod
    def _read_message(s):
        """One HTTP message (head + Content-Length body) from s, or b"" at EOF."""
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return buf
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v.strip())
        while len(rest) < n:
            d = s.recv(65536)
            if not d:
                break
            rest += d
        return head + b"\r\n\r\n" + rest

    def _serve(self, c, mode):
        c.settimeout(30)
        try:
            if mode == "hang":
                self.hung.append(c)
                self._read_message(c)
                return
            if mode == "drop_request":
                self._read_message(c)
                c.close()
                return
            u = socket.create_connection(self.target, timeout=30)
            if mode == "drop_response":
                req = self._read_message(c)
                u.sendall(req)
                self._read_message(u)  # the daemon answered: it applied the request
                u.close()
                c.close()
                return
            self._pump(c, u)
        except OSError:
            c.close()

    @staticmethod
    def _pump(a, b):
        def one(src, dst):
            try:
                while True:
                    d = src.recv(65536)
                    if not d:
                        break
                    dst.sendall(d)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        t = threading.Thread(target=one, args=(b, a), daemon=True)
        t.start()
        one(a, b)
        t.join(30)
        a.close()
        b.close()

    def close(self):
        self.stopped = True
        self.sock.close()
        for c in self.hung:
            c.close()

#!/usr/bin/env python3
"""bench_hostile.py DPBUDGETD - what ordinary callers see while hostile ones with ordinary keys
push on the ledger (a fresh daemon: its own ephemeral port and temporary data directory,
request log off).

Idle, then under a hostile mix, the latency of three probes asked one after another:
  - GET /v1/clients/{id} (a client's budget);
  - POST /v1/rounds, a one-step round of 100 participants;
  - GET /healthz.
The hostile mix, on threads and raw sockets of a process of its own (so that the probes never
wait for its Python interpreter lock):
  - reservations of 100,000 clients committed with one id the reservation never admitted
    (each answered 400, then released), over and over;
  - eligibility of pld clients near their budget for a fresh event each time (a new noise
    multiplier: a PLD per probed count), with affordable_rounds up to 1,000,000;
  - eligibility pages of 10,000 clients (a label matching 100,000) asked on 20 connections
    that never read their answers, reopened as the daemon closes them.
Prints p50, p99 and max of each probe, idle and hostile, and the ratio of the p99s (targets:
p99 under 50 ms and within 5x of idle), and what the hostile callers were answered.

The probes run on this machine, so their own process waits for a CPU too: behind the
daemon's background work (on every CPU but one, at nice +10) and behind the hostile callers'
process. A caller on a machine of its own never waits so (and the hostile callers' process
runs at the idle policy, SCHED_IDLE, for the same reason: its own work is not the daemon's).
The probe thread therefore alternates, one round of the three probes each, between real-time
priority (SCHED_FIFO 1: it runs as soon as it is woken, as a caller with a CPU of its own
would; the daemon's threads keep their own priorities, so everything the daemon does is
still in the figure) and normal priority (it competes for the CPUs with the daemon and the
hostile callers). Both are printed, from the same phases; the targets are judged on the
first. Without the right to real-time priority (not root, no CAP_SYS_NICE) only the second
is measured, and the output says so.
BENCH_HOSTILE_SECONDS sets the hostile phase's length (default 20)."""
import http.client
import json
import multiprocessing
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

SECONDS = float(os.environ.get("BENCH_HOSTILE_SECONDS", "20"))
BIG = 100000


def start(daemon, tmp):
    port_file = os.path.join(tmp, "port")
    p = subprocess.Popen([daemon, "--port", "0", "--port-file", port_file, "--data-dir",
                          os.path.join(tmp, "data"), "--no-request-log"],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"),
                         env=dict(os.environ, DPBUDGET_SHUTDOWN_GRACE="0"))
    for _ in range(2000):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return p, int(open(port_file).read())
        if p.poll() is not None:
            break
        time.sleep(0.01)
    p.kill()
    sys.exit("bench_hostile: the daemon did not start: " + open(os.path.join(tmp, "log")).read())


class Conn:
    def __init__(self, port, timeout=120):
        self.port, self.timeout = port, timeout
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            try:
                self.c.request(method, path, body=data, headers=headers)
                r = self.c.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                if attempt:
                    raise


def setup(port):
    c = Conn(port)
    for start_i in range(0, BIG, 10000):
        clients = [{"id": "h%06d" % i, "budget": {"epsilon": 1e6, "delta": 1e-5},
                    "labels": {"grp": "big"}} for i in range(start_i, start_i + 10000)]
        st, b = c.call("POST", "/v1/clients:batch", {"clients": clients})
        if st != 200:
            sys.exit("bench_hostile: registering clients: %d %s" % (st, b[:300]))
    # pld clients near their budget: distinct deltas, a DP-SGD history charged until the next
    # round no longer fits under rdp alone
    for k in range(8):
        st, b = c.call("PUT", "/v1/clients/p%d" % k,
                       {"budget": {"epsilon": 1.5, "delta": 1e-5 * (1 + k / 10)},
                        "accounting": "pld"})
        if st not in (200, 201):
            sys.exit("bench_hostile: a pld client: %d %s" % (st, b[:300]))
    ev = {"class_name": "PoissonSampledDpEvent", "sampling_probability": 0.01,
          "event": {"class_name": "GaussianDpEvent", "noise_multiplier": 1.1}}
    for r in range(60):
        c.call("POST", "/v1/rounds", {"round_id": "warm-%d" % r, "participants":
                                      ["p%d" % k for k in range(8)], "policy": "admit_eligible",
                                      "event": {"class_name": "SelfComposedDpEvent",
                                                "count": 10, "event": ev}})


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


PROBE_NAMES = ("client GET", "100-participant round", "/healthz")
REMOTE, SHARED = "real-time", "normal"


def can_run_realtime():
    """Whether this process may put a thread at SCHED_FIFO (root or CAP_SYS_NICE)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (OSError, AttributeError):
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


def set_priority(mode):
    """The calling thread at real-time priority (a caller with a CPU of its own) or normal."""
    if mode == REMOTE:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    else:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def probes(port, stop_at, n_max, tag, modes):
    """The three probes in turn until stop_at or n_max rounds of them, the probe thread's
    priority alternating over modes from one round to the next: latencies in ms, by mode."""
    c = Conn(port, timeout=60)
    lat = {m: {name: [] for name in PROBE_NAMES} for m in modes}
    i = 0
    ev = {"class_name": "GaussianDpEvent", "noise_multiplier": 50.0}
    try:
        while time.time() < stop_at and i < n_max:
            mode = modes[i % len(modes)]
            set_priority(mode)
            probe_round(c, i, tag, ev, lat[mode])
            i += 1
    finally:
        set_priority(SHARED)
    return lat


def probe_round(c, i, tag, ev, lat):
    """The three probes once, their latencies appended to lat."""
    for name, method, path, body in (
            ("client GET", "GET", "/v1/clients/h%06d" % (i * 7919 % BIG), None),
            ("100-participant round", "POST", "/v1/rounds",
             {"round_id": "%s-%d" % (tag, i), "event": ev,
              "participants": ["h%06d" % ((i * 100 + j) % BIG) for j in range(100)]}),
            ("/healthz", "GET", "/healthz", None)):
        t0 = time.perf_counter()
        st, b = c.call(method, path, body)
        ms = (time.perf_counter() - t0) * 1000
        if st != 200:
            sys.exit("bench_hostile: probe %s answered %d %s" % (name, st, b[:300]))
        lat[name].append(ms)


answers = {}
lock = threading.Lock()


def note(kind, status):
    with lock:
        answers.setdefault(kind, {}).setdefault(status, 0)
        answers[kind][status] += 1


def hostile_commits(port, stop):
    c = Conn(port)
    ids = ["h%06d" % i for i in range(BIG)]
    n = 0
    while not stop.is_set():
        rid = "hostile-commit-%d" % n
        n += 1
        st, _ = c.call("POST", "/v1/rounds", {"round_id": rid, "phase": "reserve",
                                              "participants": ids,
                                              "event": {"class_name": "GaussianDpEvent",
                                                        "noise_multiplier": 100.0}})
        note("reserve 100k", st)
        if st != 200:
            time.sleep(0.1)
            continue
        st, _ = c.call("POST", "/v1/rounds/%s/commit" % rid, {"reported": ids[1:] + ["bogus"]})
        note("commit 100k with a bogus id", st)
        st, _ = c.call("POST", "/v1/rounds/%s/release" % rid, {})
        note("release", st)


def hostile_eligibility(port, stop, seed):
    c = Conn(port)
    n = 0
    while not stop.is_set():
        n += 1
        sigma = 1.0 + seed * 0.001 + n * 1e-6  # a fresh event each time
        st, _ = c.call("POST", "/v1/eligibility", {
            "clients": ["p%d" % k for k in range(8)], "max_rounds": 1000000,
            "event": {"class_name": "PoissonSampledDpEvent", "sampling_probability": 0.01,
                      "event": {"class_name": "GaussianDpEvent", "noise_multiplier": sigma}}})
        note("pld eligibility, fresh event", st)


def hostile_unread(port, stop):
    body = json.dumps({"label": "grp=big", "limit": 10000,
                       "event": {"class_name": "GaussianDpEvent", "noise_multiplier": 1.0}})
    req = ("POST /v1/eligibility HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode()
    socks = []
    while not stop.is_set():
        socks = [s for s in socks if s.fileno() >= 0]
        while len(socks) < 20:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(req)
                socks.append(s)
                note("unread eligibility page", "sent")
            except OSError:
                note("unread eligibility page", "refused")
                break
        time.sleep(0.5)
        # a socket the daemon closed is reopened; probe with a non-blocking peek
        for s in socks:
            try:
                s.setblocking(False)
                if s.recv(1, socket.MSG_PEEK) == b"":
                    s.close()
            except BlockingIOError:
                pass
            except OSError:
                s.close()
    for s in socks:
        s.close()


def quietly(f, port, stop, *extra):
    """A hostile caller; the connection errors of the daemon's stop at the end are its own."""
    try:
        f(port, stop, *extra)
    except (OSError, http.client.HTTPException) as e:
        if not stop.is_set():
            note(f.__name__, type(e).__name__)


def hostile_mix(port, stop, told):
    """The hostile callers, on threads of this (child) process until stop is set; what they
    were answered goes to told. The process runs at the idle policy (SCHED_IDLE: any other
    thread that wakes takes its CPU at once): it stands for callers on machines of their own,
    so its own CPU (building and reading bodies of 100,000 ids) is not the daemon's to give;
    what the daemon does with their requests is all still on the daemon's CPUs."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        os.nice(19)
    threads = [threading.Thread(target=quietly, args=(f, port, stop) + extra, daemon=True)
               for f, extra in ((hostile_commits, ()), (hostile_eligibility, (1,)),
                                (hostile_eligibility, (2,)), (hostile_unread, ()))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    told.put(answers)


def show(idle, hostile, mode):
    print("probe thread at %s priority%s:" % (
        mode, " (a caller with a CPU of its own; the targets)" if mode == REMOTE else
        " (competing for the CPUs with the daemon and the hostile callers)"))
    print("%-24s %10s %10s %10s | %10s %10s %10s | %8s" % (
        "probe (ms)", "idle p50", "p99", "max", "hostile p50", "p99", "max", "p99 x"))
    for name in idle:
        a, b = idle[name], hostile[name]
        print("%-24s %10.2f %10.2f %10.2f | %11.2f %10.2f %10.2f | %8.1f" % (
            name, pct(a, .5), pct(a, .99), max(a), pct(b, .5), pct(b, .99), max(b),
            pct(b, .99) / pct(a, .99)))
    print("(targets: hostile p99 under 50 ms and within 5x of idle; %d idle and %d hostile "
          "samples of each)" % (len(idle["/healthz"]), len(hostile["/healthz"])))


def main():
    daemon = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/dpbudgetd")
    tmp = tempfile.mkdtemp(prefix="dpb-hostile-")
    p, port = start(daemon, tmp)
    try:
        t0 = time.time()
        setup(port)
        print("bench_hostile: %d clients and 8 pld clients near their budget set up in %.1f s"
              % (BIG, time.time() - t0))
        modes = (REMOTE, SHARED) if can_run_realtime() else (SHARED,)
        if len(modes) == 1:
            print("bench_hostile: real-time priority is not allowed here (not root, no "
                  "CAP_SYS_NICE): only probes competing for the CPUs are measured")
        idle = probes(port, time.time() + 120, 1000 * len(modes), "idle", modes)
        # the hostile callers in a process of their own: the probes never wait for its
        # interpreter lock (its json.dumps of 100,000 ids holds it for milliseconds)
        stop = multiprocessing.Event()
        told = multiprocessing.Queue()
        mix = multiprocessing.Process(target=hostile_mix, args=(port, stop, told), daemon=True)
        mix.start()
        time.sleep(2.0)  # the hostile callers under way
        hostile = probes(port, time.time() + SECONDS, 10 ** 9, "hostile", modes)
        stop.set()
        try:
            got = told.get(timeout=150)
        except queue.Empty:
            got = {"hostile callers": {"did not stop": 1}}
        mix.join(timeout=10)
        for mode in modes:
            show(idle[mode], hostile[mode], mode)
        print("hostile callers were answered:")
        for kind, sts in sorted(got.items()):
            print("  %-34s %s" % (kind, ", ".join("%s: %d" % (k, v) for k, v in
                                                 sorted(sts.items(), key=str))))
    finally:
        p.terminate()
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

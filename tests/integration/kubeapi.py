# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""A loopback Kubernetes API server for events.k8s.io/v1 Events, for the
tests of `memtrail watch --kube-events` (no real kube-apiserver can be built
on these machines). It speaks HTTPS with a certificate signed by a CA made
for the test, takes a bearer token read from a file (so a test can rotate
it), and enforces the rules of pkg/apis/core/validation/events.go
(ValidateEventCreate and ValidateEventUpdate for events.k8s.io/v1) and of
the generic registry (namespace of the URL, names, 409 on a name taken,
404 on a patch of a missing Event): what it stores passed them all.

    api = KubeAPI(ca)               # ca = make_ca(dir)
    api.fail_first([503, 429])      # answer these statuses first
    api.stop(); api.start()         # down, and up again on the same port
    api.events                      # {(ns, name): event}, as stored
    api.requests                    # [(method, path, status)]
    api.handshake_failures          # TLS handshakes the client ended
"""

import json
import os
import re
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# pkg/apis/core/validation/events.go
REPORTING_INSTANCE_LENGTH_LIMIT = 128
ACTION_LENGTH_LIMIT = 128
REASON_LENGTH_LIMIT = 128
NOTE_LENGTH_LIMIT = 1024

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# metav1.MicroTime: RFC3339Micro, exactly six fractional digits
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
DEPRECATED = ("deprecatedFirstTimestamp", "deprecatedLastTimestamp")
MUTABLE = ("series", "metadata")


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(d, name="memtrail-test-ca"):
    """A CA in D: (cert, key) paths."""
    os.makedirs(d, exist_ok=True)
    cert, key = os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
            "-days", "2", "-subj", f"/CN={name}")
    return cert, key


def make_server_cert(d, ca):
    """A certificate for 127.0.0.1 and localhost signed by CA: (cert, key)."""
    cert, key, csr = (os.path.join(d, "server" + x) for x in (".crt", ".key", ".csr"))
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
            "-subj", "/CN=kube-apiserver")
    openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
            "-out", cert, "-days", "2", "-extfile", ext)
    return cert, key


def qualified_name_errors(v):
    """apimachinery's IsQualifiedName."""
    parts = v.split("/")
    if len(parts) > 2:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.'"]
    name = parts[-1]
    errs = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix):
            errs.append("prefix part a lowercase RFC 1123 subdomain")
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    elif not QUALIFIED_NAME.match(name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.'")
    return errs


def blen(s):
    return len(s.encode()) if isinstance(s, str) else 0


def legacy_errors(ev, ns):
    """legacyValidateEvent, for an Event with eventTime set."""
    errs = []
    reg = ev.get("regarding") or {}
    if not ev.get("eventTime"):
        if reg.get("namespace") and reg.get("namespace") != ns:
            errs.append(f'involvedObject.namespace: Invalid value: "{reg.get("namespace")}": '
                        "does not match event.namespace")
        return errs
    if not reg.get("namespace") and ns not in ("default", "kube-system"):
        errs.append('involvedObject.namespace: Invalid value: "": does not match event.namespace')
    rc = ev.get("reportingController") or ""
    if not rc:
        errs.append("reportingController: Required value")
    for e in qualified_name_errors(rc) if rc else []:
        errs.append(f'reportingController: Invalid value: "{rc}": {e}')
    for field, limit in (("reportingInstance", REPORTING_INSTANCE_LENGTH_LIMIT),
                         ("action", ACTION_LENGTH_LIMIT), ("reason", REASON_LENGTH_LIMIT)):
        v = ev.get(field) or ""
        if not v:
            errs.append(f"{field}: Required value")
        if blen(v) > limit:
            errs.append(f'{field}: Invalid value: "": can have at most {limit} characters')
    if blen(ev.get("note") or "") > NOTE_LENGTH_LIMIT:
        errs.append(f'message: Invalid value: "": can have at most {NOTE_LENGTH_LIMIT} characters')
    if not DNS1123_SUBDOMAIN.match(ns):
        errs.append(f'namespace: Invalid value: "{ns}": a lowercase RFC 1123 subdomain')
    return errs


def series_errors(ev):
    s = ev.get("series")
    if s is None:
        return []
    errs = []
    if not isinstance(s.get("count"), int) or s["count"] < 2:
        errs.append('series.count: Invalid value: "": should be at least 2')
    if not s.get("lastObservedTime"):
        errs.append("series.lastObservedTime: Required value")
    return errs


def create_errors(ev, ns):
    """ValidateEventCreate for events.k8s.io/v1."""
    errs = legacy_errors(ev, ns)
    name = (ev.get("metadata") or {}).get("name") or ""
    if not name:
        errs.append("metadata.name: Required value: name or generateName is required")
    elif len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        errs.append(f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain')
    if len(ns) > 63 or not DNS1123_LABEL.match(ns):
        errs.append(f'metadata.namespace: Invalid value: "{ns}": a lowercase RFC 1123 label')
    errs += series_errors(ev)
    if not ev.get("eventTime"):
        errs.append("eventTime: Required value")
    if ev.get("type") not in ("Normal", "Warning"):
        errs.append(f'type: Invalid value: "": has invalid value: {ev.get("type")}')
    for f, core in zip(DEPRECATED, ("firstTimestamp", "lastTimestamp")):
        if ev.get(f):
            errs.append(f'{core}: Invalid value: "": needs to be unset')
    if ev.get("deprecatedCount"):
        errs.append('count: Invalid value: "": needs to be unset')
    src = ev.get("deprecatedSource") or {}
    if src.get("component") or src.get("host"):
        errs.append('source: Invalid value: "": needs to be unset')
    return errs


def update_errors(new, old, ns):
    """ValidateEventUpdate for events.k8s.io/v1: series alone may change."""
    errs = legacy_errors(new, ns)
    if new.get("series") != old.get("series"):
        errs += series_errors(new)
    for k in set(new) | set(old):
        if k not in MUTABLE and new.get(k) != old.get(k):
            errs.append(f"{k}: Invalid value: field is immutable")
    for k in ("name", "namespace", "uid", "creationTimestamp"):
        if (new.get("metadata") or {}).get(k) != (old.get("metadata") or {}).get(k):
            errs.append(f"metadata.{k}: Invalid value: field is immutable")
    return errs


def time_errors(ev):
    """What the decoder refuses (400): a MicroTime that is not RFC3339Micro."""
    for v in (ev.get("eventTime"), (ev.get("series") or {}).get("lastObservedTime")):
        if v is not None and not (isinstance(v, str) and MICRO_TIME.match(v)):
            return [f"parsing time {v!r}: not RFC3339Micro"]
    return []


def merge(old, patch):
    """A strategic merge patch of plain fields (what Events have): maps merged, null deletes."""
    out = dict(old)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


EVENTS = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events(?:/([^/?]+))?$")


class KubeAPI:
    def __init__(self, server_cert, token_file):
        """SERVER_CERT: (cert, key); TOKEN_FILE: the one token taken (read at each request)."""
        self.cert, self.token_file = server_cert, token_file
        self.lock = threading.Lock()
        self.events = {}
        self.requests = []
        self.failures = []
        self.handshake_failures = []
        self.uid = 0
        self.port = 0
        self.up = False
        self.httpd = None
        self.start()

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def fail_first(self, statuses):
        with self.lock:
            self.failures = list(statuses)

    def start(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 30

            def log_message(self, *a):
                pass

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "1")
                self.end_headers()
                self.wfile.write(data)
                with api.lock:
                    api.requests.append((self.command, self.path, status))

            def status(self, code, reason, message):
                self.reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "reason": reason, "message": message, "code": code})

            def handle_one(self):
                if not api.up:
                    # down: a connection kept alive from before gets no answer
                    self.close_connection = True
                    return
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                with open(api.token_file) as f:
                    token = f.read().strip()
                if self.headers.get("Authorization") != f"Bearer {token}":
                    return self.status(401, "Unauthorized", "Unauthorized")
                with api.lock:
                    fail = api.failures.pop(0) if api.failures else None
                if fail:
                    return self.status(fail, "TooManyRequests" if fail == 429 else
                                       "ServiceUnavailable", "try again later")
                m = EVENTS.match(self.path)
                if not m:
                    return self.status(404, "NotFound", f"the server could not find {self.path}")
                ns, name = m.groups()
                try:
                    doc = json.loads(body)
                except ValueError as e:
                    return self.status(400, "BadRequest", f"not JSON: {e}")
                errs = time_errors(doc)
                if errs:
                    return self.status(400, "BadRequest", errs[0])
                if self.command == "POST" and not name:
                    return self.create(ns, doc)
                if self.command == "PATCH" and name:
                    return self.patch(ns, name, doc)
                return self.status(405, "MethodNotAllowed", f"{self.command} {self.path}")

            def create(self, ns, ev):
                if self.headers.get("Content-Type") != "application/json":
                    return self.status(415, "UnsupportedMediaType", "application/json only")
                if ev.get("apiVersion") != "events.k8s.io/v1" or ev.get("kind") != "Event":
                    return self.status(400, "BadRequest", "not an events.k8s.io/v1 Event")
                meta = ev.setdefault("metadata", {})
                if meta.setdefault("namespace", ns) != ns:
                    return self.status(400, "BadRequest", "the namespace of the provided "
                                       "object does not match the namespace sent on the request")
                errs = create_errors(ev, ns)
                if errs:
                    return self.status(422, "Invalid", f'Event "{meta.get("name")}" is invalid: '
                                       + ", ".join(errs))
                with api.lock:
                    key = (ns, meta["name"])
                    if key in api.events:
                        taken = True
                    else:
                        taken = False
                        api.uid += 1
                        meta["uid"] = f"uid-{api.uid}"
                        api.events[key] = ev
                if taken:
                    return self.status(409, "AlreadyExists",
                                       f'events.events.k8s.io "{meta["name"]}" already exists')
                self.reply(201, ev)

            def patch(self, ns, name, p):
                if self.headers.get("Content-Type") != "application/strategic-merge-patch+json":
                    return self.status(415, "UnsupportedMediaType", "a strategic merge patch")
                with api.lock:
                    old = api.events.get((ns, name))
                if old is None:
                    return self.status(404, "NotFound", f'events.events.k8s.io "{name}" not found')
                new = merge(old, p)
                errs = update_errors(new, old, ns)
                if errs:
                    return self.status(422, "Invalid", f'Event "{name}" is invalid: ' +
                                       ", ".join(errs))
                with api.lock:
                    api.events[(ns, name)] = new
                self.reply(200, new)

            def do_POST(self):
                self.handle_one()

            def do_PATCH(self):
                self.handle_one()

        class Server(ThreadingHTTPServer):
            def get_request(self):
                # the handshake is made at accept: a client that refuses the
                # certificate ends it here, and the server records it
                try:
                    return super().get_request()
                except ssl.SSLError as e:
                    with api.lock:
                        api.handshake_failures.append(str(e))
                    raise

        self.httpd = Server(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*self.cert)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.up = True

    def stop(self):
        """Down: nothing listens on the port until start()."""
        self.up = False
        self.httpd.shutdown()
        self.httpd.server_close()

    def statuses(self, method=None):
        with self.lock:
            return [s for m, _, s in self.requests if method in (None, m)]

    def snapshot(self):
        with self.lock:
            return {k: json.loads(json.dumps(v)) for k, v in self.events.items()}


def kubeconfig(path, server, ca_cert, token_file, context="test"):
    """A kubeconfig file at PATH whose current context reaches SERVER with CA_CERT and TOKEN_FILE."""
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: loopback
  cluster:
    server: {server}
    certificate-authority: {ca_cert}
users:
- name: memtrail
  user:
    tokenFile: {token_file}
contexts:
- name: {context}
  context:
    cluster: loopback
    user: memtrail
current-context: {context}
""")
    return path


def _age(stamp, now):
    """kubectl's short duration of a MicroTime before NOW (seconds)."""
    import datetime
    t = datetime.datetime.strptime(stamp[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    s = max(0, int(now - t))
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h"


def describe_events(events, now=None):
    """The Events part of `kubectl describe pod` for EVENTS (pkg/describe's
    DescribeEvents: Type, Reason, Age, From, Message; a series' age as
    "LAST (xCOUNT over FIRST)"; a fieldPath before the message)."""
    import time
    now = now or time.time()
    rows = [("Type", "Reason", "Age", "From", "Message"),
            ("----", "------", "----", "----", "-------")]
    for ev in events:
        msg = ev.get("note", "")
        fp = (ev.get("regarding") or {}).get("fieldPath")
        if fp:
            msg = f"{fp}: {msg}"
        series = ev.get("series")
        age = _age(ev["eventTime"], now)
        if series:
            age = f"{_age(series['lastObservedTime'], now)} (x{series['count']} over {age})"
        rows.append((ev["type"], ev["reason"], age, ev["reportingController"], msg))
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  " + "  ".join(f"{r[i]:<{w[i]}}" for i in range(4)) + "  " + r[4]
                     for r in rows)


def kubectl_events(events, now=None):
    """`kubectl events --for pod/NAME` of EVENTS (its event_printer.go: LAST
    SEEN, TYPE, REASON, OBJECT, MESSAGE)."""
    import time
    now = now or time.time()
    rows = [("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")]
    for ev in events:
        series = ev.get("series")
        seen = _age(ev["eventTime"], now)
        if series:
            seen = f"{_age(series['lastObservedTime'], now)} (x{series['count']} over {seen})"
        reg = ev["regarding"]
        rows.append((seen, ev["type"], ev["reason"], f"{reg['kind']}/{reg['name']}",
                     ev.get("note", "")))
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("   ".join(f"{r[i]:<{w[i]}}" for i in range(4)) + "   " + r[4]
                     for r in rows)

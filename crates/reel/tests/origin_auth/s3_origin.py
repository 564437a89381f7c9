"""A private-bucket origin for reel's tests: every request must carry an AWS Signature
Version 4 that botocore's own S3 signer recomputes from the request as received, as S3
does (the path and query decoded and encoded again, the signed fields as they arrived, the
time within 15 minutes of the clock). A good signature gets the object (200, 206 for a
Range, 304 for a matching If-None-Match); a bad or missing one gets S3's 403 XML.

GET /__log (unsigned) answers the requests seen so far as JSON, for the test.

usage: s3_origin.py PORT_FILE ACCESS_KEY SECRET_KEY REGION [SESSION_TOKEN]
"""

import datetime
import hmac
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

PORT_FILE, ACCESS, SECRET, REGION = sys.argv[1:5]
TOKEN = sys.argv[5] if len(sys.argv) > 5 else None
AUTH_RE = re.compile(
    r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, "
    r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$"
)
LOG = []
LOCK = threading.Lock()


def s3_canonical(raw_target):
    """The target as S3 rebuilds it from what it decodes."""
    parts = urlsplit(raw_target)
    path = quote(unquote(parts.path), safe="/~")
    pairs = []
    for p in filter(None, parts.query.split("&")):
        k, _, v = p.partition("=")
        pairs.append(quote(unquote(k), safe="-_.~") + "=" + quote(unquote(v), safe="-_.~"))
    return path + ("?" + "&".join(pairs) if pairs else "")


def verify(handler):
    """None when the request is signed right, else why not."""
    m = AUTH_RE.match(handler.headers.get("Authorization", ""))
    if not m:
        return "no SigV4 Authorization"
    access, day, region, signed, signature = m.groups()
    if access != ACCESS or region != REGION:
        return "wrong access key or region"
    names = signed.split(";")
    for need in ["host", "x-amz-content-sha256", "x-amz-date"] + (
        ["x-amz-security-token"] if TOKEN else []
    ):
        if need not in names:
            return need + " not signed"
    if TOKEN and handler.headers.get("x-amz-security-token") != TOKEN:
        return "wrong session token"
    for name in handler.headers.keys():
        if name.lower().startswith("x-amz-") and name.lower() not in names:
            return name + " present but not signed"
    amz_date = handler.headers.get("x-amz-date", "")
    try:
        when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc
        )
    except ValueError:
        return "bad x-amz-date"
    now = datetime.datetime.now(datetime.timezone.utc)
    if abs((now - when).total_seconds()) > 900 or amz_date[:8] != day:
        return "x-amz-date too far from now"
    host = handler.headers.get("Host", "")
    url = "http://" + host + s3_canonical(handler.path)
    fields = {n: handler.headers.get(n, "") for n in names}
    request = AWSRequest(method=handler.command, url=url, headers=fields)
    request.context["timestamp"] = amz_date
    auth = S3SigV4Auth(Credentials(ACCESS, SECRET, TOKEN), "s3", REGION)
    canonical = auth.canonical_request(request)
    expected = auth.signature(auth.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected, signature):
        return "SignatureDoesNotMatch"
    return None


def body_of(key):
    size = 300_000 if "big" in key else 64
    unit = ("object " + key + "\n").encode()
    return (unit * (size // len(unit) + 1))[:size]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, fields, body=b""):
        self.send_response(status)
        for k, v in fields:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        if self.path == "/__log":
            with LOCK:
                return self.reply(200, [], json.dumps(LOG).encode())
        why = verify(self)
        key = unquote(urlsplit(self.path).path)
        entry = {
            "method": self.command,
            "target": self.path,
            "key": key,
            "verified": why is None,
            "why": why,
            "range": self.headers.get("Range"),
            "if_none_match": self.headers.get("If-None-Match"),
            "if_modified_since": self.headers.get("If-Modified-Since"),
            "authorization": self.headers.get("Authorization"),
        }
        with LOCK:
            LOG.append(entry)
        if why is not None:
            xml = "<Error><Code>SignatureDoesNotMatch</Code><Message>%s</Message></Error>" % why
            return self.reply(403, [("Content-Type", "application/xml")], xml.encode())
        body = body_of(key)
        etag = '"%08x"' % (hash(body) & 0xFFFFFFFF)
        fresh = "max-age=1" if "revalidate" in key else "max-age=3600"
        base = [
            ("ETag", etag),
            ("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ("Cache-Control", fresh),
            ("Accept-Ranges", "bytes"),
        ]
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            for k, v in base:
                self.send_header(k, v)
            self.end_headers()
            return
        rng = self.headers.get("Range")
        m = re.match(r"bytes=(\d+)-(\d*)$", rng or "")
        if m:
            first = int(m.group(1))
            last = min(int(m.group(2)) if m.group(2) else len(body) - 1, len(body) - 1)
            part = body[first : last + 1]
            base.append(("Content-Range", "bytes %d-%d/%d" % (first, last, len(body))))
            return self.reply(206, base, part)
        self.reply(200, base, body)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402

os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()

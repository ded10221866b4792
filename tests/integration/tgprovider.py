"""The provider the integration tests talk to, and the ONE switch that puts
them over HTTPS (stdlib and the openssl CLI only):

  TG_TEST_TLS=https   the stub serves HTTPS with a certificate of a test CA
                      made on the fly; tollgate verifies it (provider.ca_file)
  TG_TEST_TLS=mtls    the same, and the stub demands a client certificate,
                      which tollgate presents (provider.client_cert/_key)
  TG_TEST_PROFILE=stripe|checkout|adyen|paypal
                      the stub speaks that profile of docs/providers/ and
                      demands a bearer key and signed requests (paypal: an
                      OAuth 2.0 client id and secret for its tokens, and
                      no signature, PayPal signs none; adyen: the
                      stub's signed notifications sent to the API port
                      of the tollgate started for it, checked with a
                      hex HMAC key of the harness); tollgate's
                      [provider] and [classify] come from
                      docs/providers/NAME.ini itself
Unset: plain HTTP and shared/PROVIDER.md, as before.

Certificates, keys and secrets are made once per test process in a temp dir
(removed at exit) and never committed: a CA, a server certificate for
127.0.0.1/localhost, an expired one, one for another host, a client
certificate, and a second CA with a client certificate of its own. Secrets
hold a recognisable marker (SECRET_MARK) so that a test can look for them in
every output.
"""

import atexit
import hashlib
import hmac
import os
import time
import secrets
import shutil
import ssl
import subprocess
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))

TLS_MODES = ("", "https", "mtls")
PROFILES = ("provider-md", "stripe", "checkout", "adyen", "paypal")
TLS = os.environ.get("TG_TEST_TLS", "")
PROFILE = os.environ.get("TG_TEST_PROFILE", "") or "provider-md"
if TLS not in TLS_MODES:
    raise SystemExit("TG_TEST_TLS must be empty, https or mtls, not %r" % TLS)
if PROFILE not in PROFILES:
    raise SystemExit("TG_TEST_PROFILE must be one of %s, not %r" % (", ".join(PROFILES), PROFILE))

SECRET_MARK = "tgSECRETmark"


def source_dir():
    return os.environ.get("TG_SOURCE_DIR") or os.path.abspath(os.path.join(_HERE, "..", ".."))


def _run(args, cwd):
    p = subprocess.run(["openssl"] + args, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (" ".join(args), p.stderr))


def _private(path):
    os.chmod(path, 0o600)
    return path


class Pki:
    """Every certificate the tests need, P-256 (fast handshakes)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tgtls-")
        d = self.dir
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        with open(os.path.join(d, "ca.cnf"), "w") as f:
            f.write("[ca]\ndefault_ca=tg\n[tg]\ndatabase=index.txt\nnew_certs_dir=.\n"
                    "serial=serial\ndefault_md=sha256\npolicy=any\nunique_subject=no\n"
                    "[any]\ncommonName=supplied\n"
                    "[srv]\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
                    "extendedKeyUsage=serverAuth\n"
                    "[other_host]\nsubjectAltName=DNS:other.invalid\n"
                    "extendedKeyUsage=serverAuth\n"
                    "[cli]\nextendedKeyUsage=clientAuth\n")
        for name in ("ca", "other_ca"):
            _run(["req", "-x509"] + ec + ["-keyout", name + ".key", "-out", name + ".pem",
                  "-days", "30", "-subj", "/CN=tollgate test %s" % name,
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign"], d)
        open(os.path.join(d, "index.txt"), "w").close()
        with open(os.path.join(d, "serial"), "w") as f:
            f.write("1000\n")

        def issue(name, cn, ext, ca="ca", dates=("-days", "30")):
            _run(["req"] + ec + ["-keyout", name + ".key", "-out", name + ".csr",
                  "-subj", "/CN=" + cn], d)
            _run(["ca", "-batch", "-config", "ca.cnf", "-cert", ca + ".pem", "-keyfile",
                  ca + ".key", "-in", name + ".csr", "-out", name + ".pem", "-extensions",
                  ext, "-notext"] + list(dates), d)
            _private(os.path.join(d, name + ".key"))

        issue("server", "127.0.0.1", "srv")
        issue("expired", "127.0.0.1", "srv",
              dates=("-startdate", "20200101000000Z", "-enddate", "20200102000000Z"))
        issue("wrong_host", "other.invalid", "other_host")
        issue("client", "tollgate client", "cli")
        issue("client_other", "stranger", "cli", ca="other_ca")

    def path(self, name):
        return os.path.join(self.dir, name)


class Secrets:
    """The provider's API key and signing key, and an OAuth 2.0 client id
    (its secret is the API key), in files of their own."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tgsecrets-")
        self.api_key = "sk_test_%s_%s" % (SECRET_MARK, secrets.token_hex(8))
        self.signing_key = "whsk_%s_%s" % (SECRET_MARK, secrets.token_hex(8))
        self.client_id = "client-%s" % secrets.token_hex(8)
        self.api_key_file = self._write("api-key", self.api_key)
        self.signing_key_file = self._write("signing-key", self.signing_key)
        self.client_id_file = self._write("client-id", self.client_id)
        # a notification-only profile's webhook key: Adyen's HMAC key is hex
        # (no room for SECRET_MARK)
        self.webhook_key_hex = secrets.token_hex(32).upper()
        self.webhook_key_file = self._write("webhook-hmac", self.webhook_key_hex)

    def _write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text + "\n")
        return _private(path)


_pki = None
_secrets = None


def _cleanup():
    for thing in (_pki, _secrets):
        if thing is not None:
            shutil.rmtree(thing.dir, ignore_errors=True)


atexit.register(_cleanup)


def pki():
    global _pki
    if _pki is None:
        _pki = Pki()
    return _pki


def test_secrets():
    global _secrets
    if _secrets is None:
        _secrets = Secrets()
    return _secrets


def read_profile(name):
    """The profile INI of docs/providers/ as [(section, key, value)], in order
    (repeated keys kept)."""
    out, section = [], None
    with open(os.path.join(source_dir(), "docs", "providers", name + ".ini")) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            out.append((section, key.strip(), value.strip()))
    return out


# Keys a deployment sets to its own paths and URL: the harness sets them.
_LOCAL_KEYS = {"base_url", "ca_file", "client_cert", "client_key", "auth_secret_file",
               "client_id_file", "signing_key_file", "webhook_secret_file"}


def _oauth2(profile):
    """The profile authenticates with OAuth 2.0 client-credentials tokens."""
    return any(sec == "provider" and k == "auth" and v == "oauth2"
               for sec, k, v in read_profile(profile))


def notification_only(profile=None):
    """The profile learns outcomes only from the provider's notifications
    (provider.reconcile begins with notification: Adyen). Under it the stub
    sends its signed notifications to the tollgate that the test starts for
    it (webhook_port), and tollgate checks them with the harness's key."""
    profile = profile or PROFILE
    if profile == "provider-md":
        return False
    return any(sec == "provider" and k == "reconcile" and v.split(",")[0].strip() ==
               "notification" for sec, k, v in read_profile(profile))


# A notification-only stub's notifications go to the API port of the one
# tollgate a test starts for it: the port is chosen with the stub's flags
# (before the stub starts) and taken by the Tollgate of that stub's URL.
_webhook_ports = {}
_pending_webhook_port = []


def webhook_port(stub_url):
    """The API port the notification-only stub at stub_url sends to, or None."""
    return _webhook_ports.get(stub_url)


def stub_started(stub_url):
    """Called by tgtest.Stub once its URL is known: ties the webhook port
    its flags named (if any) to it."""
    if _pending_webhook_port:
        _webhook_ports[stub_url] = _pending_webhook_port.pop()


def token_path(profile=None):
    """The path of the exit's OAuth 2.0 token calls under the profile
    (provider.token_path, its default when unset), None when it has none:
    `tollgate verify --token-path` tells them from a side door."""
    profile = profile or PROFILE
    if profile == "provider-md" or not _oauth2(profile):
        return None
    return {k: v for sec, k, v in read_profile(profile)
            if sec == "provider"}.get("token_path", "/v1/oauth2/token")


def contract_arrivals(arrivals, profile=None):
    """A stub's arrivals on the provider's contract, whatever the profile's
    paths (PROVIDER.md's /v1/..., PayPal's /v2/..., Adyen's /v71/...,
    Checkout.com's /payments/...): not its admin API (/_stub/...) nor the
    exit's OAuth 2.0 token calls (no operation's)."""
    token = token_path(profile)
    return [a for a in arrivals if not a["path"].startswith("/_") and a["path"] != token]


def provider_sections(stub_url, tls=None, profile=None, credentials=True):
    """tollgate's [provider] and [classify] for a stub at stub_url started with
    the same tls and profile: {"provider": {...}, "classify": {"rule": [...]}}."""
    tls = TLS if tls is None else tls
    profile = profile or PROFILE
    provider = {"base_url": stub_url}
    rules = []
    if profile != "provider-md":
        for section, key, value in read_profile(profile):
            if section == "classify" and key == "rule":
                rules.append(value)
            elif section == "provider" and key not in _LOCAL_KEYS:
                if key in ("body_field", "header"):
                    provider.setdefault(key, []).append(value)
                else:
                    provider[key] = value
        if credentials and _oauth2(profile):
            # the client id and secret of the token call; no signature
            s = test_secrets()
            provider["client_id_file"] = s.client_id_file
            provider["auth_secret_file"] = s.api_key_file
        elif credentials:
            s = test_secrets()
            provider["auth_secret_file"] = s.api_key_file
            provider["signing_key_file"] = s.signing_key_file
        elif _oauth2(profile):
            # PayPal always wants a bearer: any client gets a token
            s = test_secrets()
            provider["client_id_file"] = s.client_id_file
            provider["auth_secret_file"] = s.api_key_file
        else:
            provider["auth"] = "none"
        if notification_only(profile):
            provider["webhook_secret_file"] = test_secrets().webhook_key_file
    if stub_url.startswith("https://"):
        provider["ca_file"] = pki().path("ca.pem")
        if tls == "mtls":
            provider["client_cert"] = pki().path("client.pem")
            provider["client_key"] = pki().path("client.key")
    out = {"provider": provider}
    if rules:
        out["classify"] = {"rule": rules}
    return out


def stub_flags(tls=None, profile=None, server="server", credentials=True, webhook=True):
    """tollgate-stub's flags for the switches: HTTPS (with server's certificate),
    the client CA under mtls, the shape and what it demands of callers; a
    notification-only shape's notifications (webhook=False: the test sends
    them where it wants with its own --webhook-url)."""
    tls = TLS if tls is None else tls
    profile = profile or PROFILE
    flags = []
    if tls:
        p = pki()
        flags += ["--tls-cert", p.path(server + ".pem"), "--tls-key", p.path(server + ".key")]
        if tls == "mtls":
            flags += ["--tls-client-ca", p.path("ca.pem")]
    if profile != "provider-md":
        flags += ["--shape", profile]
        if credentials and _oauth2(profile):
            s = test_secrets()
            flags += ["--client-id-file", s.client_id_file, "--auth-secret-file", s.api_key_file]
        elif credentials:
            s = test_secrets()
            ini = {k: v for sec, k, v in read_profile(profile) if sec == "provider"}
            flags += ["--auth-secret-file", s.api_key_file,
                      "--signing-key-file", s.signing_key_file]
            if ini.get("auth") == "header":  # Adyen's X-API-Key
                flags += ["--auth-header", ini["auth_header"]]
            if webhook and notification_only(profile):
                # import here: tgtest imports this module
                import tgtest
                port = tgtest.free_port()
                del _pending_webhook_port[:]
                _pending_webhook_port.append(port)
                flags += ["--webhook-url", "http://127.0.0.1:%d/v1/provider-events" % port,
                          "--webhook-secret-file", s.webhook_key_file]
            for key, flag in (("signature_header", "--signature-header"),
                              ("timestamp_header", "--timestamp-header"),
                              ("signing_string", "--signing-string"),
                              ("signature_encoding", "--signature-encoding"),
                              ("signature_prefix", "--signature-prefix")):
                if ini.get(key):
                    flags += [flag, ini[key]]
    return flags


def caller_headers(profile, method, path, body, key, request_id="test-helper"):
    """What a stub of this profile demands of a caller, for the tests' own
    contract requests: the bearer key and the signature (the profile's
    signing string; {method} {path} {timestamp} {idempotency_key}
    {body_sha256} {request_id} and \\n)."""
    if profile == "provider-md":
        return {}
    s = test_secrets()
    ini = {k: v for sec, k, v in read_profile(profile) if sec == "provider"}
    ts = str(int(time.time()))
    data = body if isinstance(body, bytes) else (body or "").encode()
    text = ini.get("signing_string", "{method}\\n{path}\\n{timestamp}\\n{idempotency_key}"
                                     "\\n{body_sha256}")
    for name, value in (("{method}", method), ("{path}", path), ("{timestamp}", ts),
                        ("{idempotency_key}", key), ("{request_id}", request_id),
                        ("{body_sha256}", hashlib.sha256(data).hexdigest()), ("\\n", "\n")):
        text = text.replace(name, value)
    mac = hmac.new(s.signing_key.encode(), text.encode(), hashlib.sha256).hexdigest()
    auth = ({ini["auth_header"]: s.api_key} if ini.get("auth") == "header"
            else {"Authorization": "Bearer " + s.api_key})
    return {**auth,
            ini.get("timestamp_header", "X-Timestamp"): ts,
            ini.get("signature_header", "X-Signature"): ini.get("signature_prefix", "") + mac,
            ini.get("key_header", "Idempotency-Key"): key, "X-Request-Id": request_id}


def ssl_context(verify=True):
    """For the tests' own requests to an HTTPS stub (its admin endpoints
    included): the test CA, and the client certificate (the stub may demand
    it). verify=False for a stub started on purpose with a certificate that
    does not verify (expired, another host): the test still reads its
    record; tollgate itself never skips verification."""
    ctx = ssl.create_default_context(cafile=pki().path("ca.pem"))
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(pki().path("client.pem"), pki().path("client.key"))
    return ctx


# ---- helpers of the profile tests (test_profile_*.py) -------------------------------

def posts_and_queries(calls):
    """tollgate's call log split: (POSTs of any kind, queries)."""
    return ([c for c in calls if c["kind"] != "query"],
            [c for c in calls if c["kind"] == "query"])


class ProfileCase:
    """A mixin for a unittest.TestCase of one shipped profile (PROFILE):
    the stub in that shape and a tollgate with that profile, plain HTTP."""
    PROFILE = None

    def start(self, *flags):
        import tgtest
        return tgtest.start_stub(*flags, tls="", profile=self.PROFILE)

    def tollgate(self, stub, **sections):
        from tgdaemon import Tollgate
        return Tollgate(stub.url, tls="", profile=self.PROFILE, **sections)

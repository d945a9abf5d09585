"""The pinned clients (`belvedir.pinned`) verify TLS against the base's host name, with the
certificate authorities the operator gives the process (SSL_CERT_FILE, as behind a
TLS-intercepting proxy or for a provider with a private CA; the bundled ones where none is
given), while they still connect only to the address they checked. Talks only to 127.0.0.1: a local HTTPS
server with a certificate for NAME, signed by a CA made here."""

import datetime
import http.server
import ssl
import threading

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from belvedir import pinned
from tests.helpers.resolvers import answers

NAME = "models.tls.test"


def _certificate(subject: str, key, issuer_name, issuer_key, *, ca: bool):
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture
def https_server(tmp_path):
    """(port, the CA's PEM path): a server answering 200 over TLS as NAME."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Belvedir test CA")])
    ca = _certificate("Belvedir test CA", ca_key, ca_name, ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(NAME, key, ca_name, ca_key, ca=False)
    ca_file, cert_file, key_file = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], str(ca_file)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def allowed(settings):
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_MODEL_HOST_ALLOWLIST = ["127.0.0.1/32"]


def _get(port: int) -> httpx.Response:
    resolver = answers("127.0.0.1")
    with pinned.sync_client(timeout=10, resolver=resolver) as client:
        return client.get(f"https://{NAME}:{port}/v1/models")


def test_a_base_whose_ca_the_operator_gave_in_ssl_cert_file_is_verified_and_reached(
    allowed, https_server, monkeypatch
):
    port, ca_file = https_server
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    response = _get(port)
    assert response.status_code == 200
    assert response.text == "ok"


def test_a_certificate_no_trusted_ca_signed_is_refused(allowed, https_server, monkeypatch):
    port, _ = https_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        _get(port)


def test_the_name_is_verified_not_the_address(allowed, https_server, monkeypatch):
    """The connection goes to 127.0.0.1, the certificate is for NAME: asked by address, the
    same server fails verification (its certificate does not name 127.0.0.1)."""
    port, ca_file = https_server
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    with pinned.sync_client(timeout=10) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED|match"):
            client.get(f"https://127.0.0.1:{port}/v1/models")

"""Helpers of the built-in tools' tests (a module of its own: ``conftest`` names clash across test folders)."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

import pytest

from toolplan.builtin import shell_confinement_problem

SHELL_PROBLEM = shell_confinement_problem()
needs_shell = pytest.mark.skipif(SHELL_PROBLEM is not None, reason=f"no shell sandbox here: {SHELL_PROBLEM}")


def make_tls(tmp_path: Path, name: str = "localhost") -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting it) for a self-signed certificate of ``name``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    client_ctx = ssl.create_default_context(cadata=cert_pem.decode())
    return server_ctx, client_ctx

"""A fleet over TLS (``rediss://``) on loopback: the CA file is used, a wrong one refused."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator

import pytest

from scoutd.testing.fleet import RedisServer
from tests.fleet.hosts import (
    delivered_copies,
    fleet_host,
    operator,
    publish_sync,
    wait_connected,
    wait_receipts,
)

OPENSSL_TIMEOUT = 30.0


def openssl(directory: str, *args: str) -> None:
    subprocess.run(
        ["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=OPENSSL_TIMEOUT
    )


def certificates(directory: str, name: str) -> tuple[str, str, str]:
    """A CA, and a certificate for 127.0.0.1 signed by it: (ca, cert, key) paths.

    Both carry the extensions strict X.509 checking asks for (Python 3.13 checks
    so by default: ``VERIFY_X509_STRICT``): the CA its key usage, the server
    certificate its authority key identifier (docs/OPERATIONS.md, "A fleet").
    """
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl(directory, "req", "-x509", *ec, "-keyout", f"{name}-ca.key", "-out",
            f"{name}-ca.crt", "-days", "1", "-subj", f"/CN={name} test CA",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    openssl(directory, "req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", "/CN=127.0.0.1")  # fmt: skip
    with open(os.path.join(directory, "san.ext"), "w") as handle:
        # what strict X.509 checking (Python 3.13's default) asks of a server's certificate
        handle.write("subjectAltName=IP:127.0.0.1\nauthorityKeyIdentifier=keyid,issuer\n")
        handle.write("basicConstraints=critical,CA:FALSE\nkeyUsage=digitalSignature\n")
        handle.write("extendedKeyUsage=serverAuth\n")
    openssl(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{name}-ca.crt",
            "-CAkey", f"{name}-ca.key", "-CAcreateserial", "-out", f"{name}.crt", "-days", "1",
            "-extfile", "san.ext")  # fmt: skip
    return tuple(
        os.path.join(directory, f) for f in (f"{name}-ca.crt", f"{name}.crt", f"{name}.key")
    )  # type: ignore[return-value]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def tls_redis() -> Iterator[tuple[RedisServer, str, str]]:
    """A Redis with a TLS port on loopback: (server, its rediss:// URL, the CA file)."""
    server = RedisServer()
    ca, cert, key = certificates(server.dir, "server")
    port = free_port()
    server.args = [
        *("--bind", "127.0.0.1", "--tls-port", str(port)),
        *("--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca),
        *("--tls-auth-clients", "no"),
    ]
    try:
        server.start()
        yield server, f"rediss://127.0.0.1:{port}/0", ca
    finally:
        server.cleanup()


def test_a_fleet_over_tls(tls_redis: tuple[RedisServer, str, str]) -> None:
    server, url, ca = tls_redis
    with fleet_host(url, "h1", tls_ca_file=ca) as host:
        wait_connected(host)
        chat = os.path.join(host.dir, "agent.chat")
        with open(chat, "w") as handle:
            handle.write("[]")
        ops = operator(server)  # the operator over the Unix socket, the host over TLS
        command = publish_sync(ops, "notice", f"chat={chat}", "over TLS")
        assert wait_receipts(ops, command.id, ["h1"]).receipts[0].chats == [chat]
        assert delivered_copies(chat, command) == 1


def test_a_server_certificate_from_another_ca_is_refused(
    tls_redis: tuple[RedisServer, str, str],
) -> None:
    _server, url, ca = tls_redis
    other_ca, _, _ = certificates(os.path.dirname(ca), "other")
    with fleet_host(url, "h1", tls_ca_file=other_ca) as host:
        fleet = host.status()["fleet"]
        assert fleet["connected"] is False
        assert "certificate" in fleet["last_error"].lower()

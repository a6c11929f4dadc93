"""A CONNECT proxy on 127.0.0.1 that lets TensorFlow's own gs:// filesystem talk to the GCS emulator.

TensorFlow's GCS client has its endpoints compiled in (https://www.googleapis.com and
https://storage.googleapis.com) and reads no emulator variable, but libcurl honours
HTTPS_PROXY and CURL_CA_BUNDLE. This proxy answers CONNECT for those hosts, terminates TLS
with a throwaway self-signed certificate, and relays the plain HTTP to the emulator.
It runs in its own process (``python -m tests.gcs_proxy``): TensorFlow holds the GIL while
closing a writer, which would stall a proxy thread in the same process.
"""

from __future__ import annotations

import argparse
import datetime
import socket
import ssl
import sys
import threading
from pathlib import Path

HOSTS = ("www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com")


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for HOSTS, valid for a day; returns (cert.pem, key.pem)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOSTS[0])])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in HOSTS]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "proxy-cert.pem", folder / "proxy-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, target):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(client: socket.socket, context: ssl.SSLContext, emulator: tuple[str, int]) -> None:
    request = b""
    while b"\r\n\r\n" not in request:
        chunk = client.recv(4096)
        if not chunk:
            client.close()
            return
        request += chunk
    line = request.split(b"\r\n", 1)[0].decode("latin-1")
    method, target = line.split(" ")[:2]
    if method != "CONNECT" or target.split(":")[0] not in HOSTS:
        client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        client.close()
        return
    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    tls = context.wrap_socket(client, server_side=True)
    upstream = socket.create_connection(emulator)
    threading.Thread(target=_pipe, args=(upstream, tls), daemon=True).start()
    _pipe(tls, upstream)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--emulator", required=True, help="http://127.0.0.1:PORT of the GCS emulator")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    host, port = args.emulator.rsplit("/", 1)[-1].split(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server = socket.create_server(("127.0.0.1", 0))
    print(server.getsockname()[1], flush=True)  # the parent reads the port from here
    while True:
        client, _ = server.accept()
        threading.Thread(target=_serve, args=(client, context, (host, int(port))), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())

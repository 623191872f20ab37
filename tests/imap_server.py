"""A real IMAP server for the tests: a private Dovecot (Debian's `/usr/sbin/dovecot`) run in
the foreground with its own configuration in a temporary directory — plaintext login on
127.0.0.1 only, one passwd-file user, a maildir under the directory, a free port. Messages are
put in by IMAP APPEND, as any other client would."""

from __future__ import annotations

import contextlib
import getpass
import grp
import imaplib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helpers import wait_until

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
USER, PASSWORD = "desk", "secret-of-the-desk"

CONFIG = """
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = {ssl}
{ssl_files}disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {login_user}
first_valid_uid = 0
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/home/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {tls_port}
  }}
}}
service stats {{
  inet_listener http {{
    port = 0
  }}
}}
"""


def available() -> str | None:
    """Why no Dovecot can run here, or None."""
    if not os.access(DOVECOT, os.X_OK):
        return f"no Dovecot at {DOVECOT} (Debian: apt-get install dovecot-imapd)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _certificates(root: Path) -> None:
    """ca.pem (a private CA) and cert.pem/key.pem (127.0.0.1's certificate, signed by it)."""
    now = datetime.now(UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "taskdesk test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                       critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(IPv4Address("127.0.0.1")), x509.DNSName("localhost")]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pem = serialization.Encoding.PEM
    (root / "ca.pem").write_bytes(ca.public_bytes(pem))
    (root / "cert.pem").write_bytes(leaf.public_bytes(pem))
    (root / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


class ImapServer:
    """`tls=True` adds an IMAPS listener on `tls_port` with a certificate for 127.0.0.1 signed
    by a private CA of its own (`ca_file`, trusted by nobody until given as MAIL_CA_FILE)."""

    def __init__(self, root: Path, *, tls: bool = False) -> None:
        self.root = root
        self.port = _free_port()
        self.host = "127.0.0.1"
        self.tls_port = _free_port() if tls else 0
        self.ca_file = str(root / "ca.pem") if tls else ""
        for d in ("run", "state", "mail", "home"):
            (root / d).mkdir(parents=True, exist_ok=True)
        me = pwd.getpwuid(os.getuid())
        login = "dovenull" if os.getuid() == 0 else me.pw_name
        # Dovecot refuses to keep mail as root: as root, the mail belongs to its own user.
        owner = pwd.getpwnam("dovecot") if os.getuid() == 0 else me
        for d in ("mail", "home"):
            os.chown(root / d, owner.pw_uid, owner.pw_gid)
        (root / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n")
        ssl_files = ""
        if tls:
            _certificates(root)
            ssl_files = f"ssl_cert = <{root}/cert.pem\nssl_key = <{root}/key.pem\n"
        (root / "dovecot.conf").write_text(
            CONFIG.format(
                root=root, port=self.port, tls_port=self.tls_port, ssl="yes" if tls else "no",
                ssl_files=ssl_files, uid=owner.pw_uid, gid=owner.pw_gid,
                user=getpass.getuser(), group=grp.getgrgid(os.getgid()).gr_name, login_user=login,
            )
        )  # fmt: skip
        if os.getuid() == 0:  # the mail process runs as `dovecot` and must reach its folder
            os.chmod(root, 0o755)
        self.proc = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(root / "dovecot.conf")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        self._wait()

    def _wait(self, timeout: float = 60.0) -> None:
        wait_until(self._answers, timeout, f"dovecot on port {self.port}: {self.root}/dovecot.log")

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"dovecot exited: {self.log()}")
        try:
            with self.client():
                return True
        except OSError:
            return False

    def log(self) -> str:
        path = self.root / "dovecot.log"
        err = (
            self.proc.stderr.read().decode()
            if self.proc.poll() is not None and self.proc.stderr
            else ""
        )
        return (path.read_text()[-2000:] if path.exists() else "") + err[-2000:]

    def client(self) -> imaplib.IMAP4:
        imap = imaplib.IMAP4(self.host, self.port, timeout=10)
        imap.login(USER, PASSWORD)
        return imap

    def append(self, raw: bytes, folder: str = "INBOX") -> None:
        with self.client() as imap:
            typ, said = imap.append(folder, "", None, raw)
            assert typ == "OK", said

    def create_folder(self, folder: str) -> None:
        with self.client() as imap:
            typ, said = imap.create(folder)
            assert typ == "OK", said

    def append_many(self, raws: list[bytes], folder: str = "INBOX") -> None:
        with self.client() as imap:
            for raw in raws:
                typ, said = imap.append(folder, "", None, raw)
                assert typ == "OK", said

    def flags(self, folder: str = "INBOX") -> list[bytes]:
        """Each message's flags (nothing a fetch may set)."""
        with self.client() as imap:
            imap.select(folder, readonly=True)
            _typ, data = imap.fetch("1:*", "(FLAGS)")
            return [bytes(d) for d in data if d]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def running(*, tls: bool = False) -> Iterator[ImapServer]:
    """A Dovecot for one test, removed afterwards. Not under pytest's tmp_path: as root,
    Dovecot's mail process (its own user) must reach the folder."""
    root = Path(tempfile.mkdtemp(prefix="taskdesk-imap-"))
    server = ImapServer(root, tls=tls)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


class Proxy:
    """A TCP proxy in front of a server, on threads of its own (it keeps serving while the test
    blocks): the server's bytes can be slowed (`rate`, bytes per second) and a connection cut
    after so many of them (`cuts`, one budget per new connection, in order; none left: not
    cut) — the server dropping the connection mid-fetch. `connections` counts what it accepted."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, port)
        self.host = "127.0.0.1"
        self.rate: float | None = None
        self.cuts: list[int] = []
        self.connections = 0
        self.cut = 0  # connections it cut
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._server = socket.create_server((self.host, 0))
        self.port = int(self._server.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self.connections += 1
                budget = self.cuts.pop(0) if self.cuts else None
                self._open |= {client, upstream}
            threading.Thread(
                target=self._pump, args=(client, upstream, None, False), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(upstream, client, budget, True), daemon=True
            ).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, budget: int | None, served: bool
    ) -> None:
        try:
            while True:
                data = src.recv(4096 if self.rate is None else 512)
                if not data:
                    break
                if budget is not None and len(data) >= budget:
                    dst.sendall(data[:budget])
                    with self._lock:
                        self.cut += 1
                    break
                if budget is not None:
                    budget -= len(data)
                if served and self.rate is not None:
                    time.sleep(len(data) / self.rate)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._hang_up(src, dst)

    def _hang_up(self, *socks: socket.socket) -> None:
        for s in socks:
            with self._lock:
                self._open.discard(s)
            for close in (lambda s=s: s.shutdown(socket.SHUT_RDWR), s.close):
                with contextlib.suppress(OSError):
                    close()

    def drop_all(self) -> None:
        """Every open connection closed at once, as a restarting server closes them."""
        with self._lock:
            socks = list(self._open)
        self._hang_up(*socks)

    def close(self) -> None:
        self._server.close()
        self.drop_all()

"""A real IMAP server for the tests: a private Dovecot (Debian's `/usr/sbin/dovecot`) run in
the foreground with its own configuration in a temporary directory — plaintext login on
127.0.0.1 only, one passwd-file user, a maildir under the directory, a free port. Messages are
put in by IMAP APPEND, as any other client would."""

from __future__ import annotations

import getpass
import grp
import imaplib
import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

from tests.helpers import wait_until

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
USER, PASSWORD = "desk", "secret-of-the-desk"

CONFIG = """
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
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
    port = 0
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


class ImapServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.host = "127.0.0.1"
        for d in ("run", "state", "mail", "home"):
            (root / d).mkdir(parents=True, exist_ok=True)
        me = pwd.getpwuid(os.getuid())
        login = "dovenull" if os.getuid() == 0 else me.pw_name
        # Dovecot refuses to keep mail as root: as root, the mail belongs to its own user.
        owner = pwd.getpwnam("dovecot") if os.getuid() == 0 else me
        for d in ("mail", "home"):
            os.chown(root / d, owner.pw_uid, owner.pw_gid)
        (root / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n")
        (root / "dovecot.conf").write_text(
            CONFIG.format(
                root=root, port=self.port, uid=owner.pw_uid, gid=owner.pw_gid,
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

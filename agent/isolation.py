"""Children that run or parse what Parley does not trust (stdio MCP servers, the PDF reader)
must not read Parley: they get only the environment given to them, and they lose
CAP_SYS_PTRACE before their program starts. Once Parley is non-dumpable (`undumpable`), a
process without that capability cannot open /proc/<parley>/environ or /proc/<parley>/mem,
even as the same user or as root. Linux only; elsewhere these do nothing.

    python -m agent.isolation <command> [args...]    drop the capability, then exec the command
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys

PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
CAP_SYS_PTRACE = 19
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _libc() -> ctypes.CDLL | None:
    return ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def undumpable() -> bool:
    """Make this process's /proc files (environ, mem, maps) closed to processes without
    CAP_SYS_PTRACE (no core dumps either). True if the kernel took it."""
    libc = _libc()
    return libc is not None and libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def drop_privileges() -> None:
    """In a child, before untrusted work: no CAP_SYS_PTRACE now or after exec, and no way to
    gain privileges (setuid programs) later. Refusals (no CAP_SETPCAP) are fine: then the
    capability was not there to drop."""
    libc = _libc()
    if libc is None:
        return
    libc.prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) == 0:
        keep = ~(1 << CAP_SYS_PTRACE) & 0xFFFFFFFF
        data[0].effective &= keep
        data[0].permitted &= keep
        data[0].inheritable &= keep
        libc.capset(ctypes.byref(header), data)


def isolated(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The command line that runs `command args` through this module's launcher. A command
    that cannot run fails here, as it would without the launcher (FileNotFoundError,
    PermissionError)."""
    if os.path.isabs(command):
        if not os.path.exists(command):
            raise FileNotFoundError(command)
        if not os.access(command, os.X_OK):
            raise PermissionError(command)
    elif os.sep not in command and shutil.which(command) is None:
        raise FileNotFoundError(command)
    return sys.executable, ["-m", __name__, command, *args]


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m agent.isolation <command> [args...]")
    drop_privileges()
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()

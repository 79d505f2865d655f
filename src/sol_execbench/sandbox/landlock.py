"""Landlock through its three system calls (ctypes): writes only beneath given folders, no TCP,
no signals or abstract-socket connections out of the sandbox.

Landlock is an allow-list over the access rights a ruleset *handles*: a handled right is refused
everywhere except beneath the folders a rule grants it for. Read and execute rights are not handled,
so reads stay open (see docs/security.md). The restriction applies to the calling thread and every
thread and process it starts afterwards; it cannot be lifted.
"""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights (include/uapi/linux/landlock.h), by the ABI that introduced them.
_FS_WRITE_ABI1 = (
    (1 << 1)     # WRITE_FILE
    | (1 << 4)   # REMOVE_DIR
    | (1 << 5)   # REMOVE_FILE
    | (1 << 6)   # MAKE_CHAR
    | (1 << 7)   # MAKE_DIR
    | (1 << 8)   # MAKE_REG
    | (1 << 9)   # MAKE_SOCK
    | (1 << 10)  # MAKE_FIFO
    | (1 << 11)  # MAKE_BLOCK
    | (1 << 12)  # MAKE_SYM
)
_FS_REFER = 1 << 13      # ABI 2: rename/link across folders
_FS_TRUNCATE = 1 << 14   # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5: ioctl on device files opened after the restriction
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


class LandlockError(OSError):
    """The kernel refused a step of the restriction (nothing was restricted)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> tuple[int, str | None]:
    """(the Landlock ABI the kernel offers, why none) -- 0 with the reason when it offers none."""
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        return 0, f"Landlock system call numbers unknown on {platform.machine()}"
    try:
        libc = _libc()
    except OSError as exc:
        return 0, f"libc not loadable: {exc}"
    version = libc.syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if version < 0:
        errno = ctypes.get_errno()
        why = {38: "the kernel has no Landlock (ENOSYS)", 95: "Landlock is disabled at boot (EOPNOTSUPP)"}
        return 0, why.get(errno, f"landlock_create_ruleset failed: {os.strerror(errno)}")
    return int(version), None


def fs_write_rights(abi: int) -> int:
    rights = _FS_WRITE_ABI1
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def restrict_self(writable: list[Path], abi: int) -> None:
    """Restrict this thread (and what it starts) to writing beneath ``writable``; with ABI 4+ no TCP,
    with ABI 6+ no signals or abstract-socket connections outside. Raises LandlockError."""
    create, add_rule, restrict = _SYSCALLS[platform.machine()]
    libc = _libc()
    handled_fs = fs_write_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled_fs,
                        handled_access_net=(_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
                        scoped=(_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
    # The structure grew with the ABI; an older kernel refuses a size it does not know.
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise LandlockError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for folder in writable:
            _allow_beneath(libc, add_rule, ruleset, folder, handled_fs)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
        if libc.syscall(restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise LandlockError(ctypes.get_errno(), f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)


def _allow_beneath(libc: ctypes.CDLL, add_rule: int, ruleset: int, folder: Path, rights: int) -> None:
    try:
        fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a folder that does not exist grants nothing
    try:
        if not os.path.isdir(folder):  # a rule on a file may only grant rights that apply to files
            rights &= (1 << 1) | _FS_TRUNCATE | _FS_IOCTL_DEV
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        if libc.syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            raise LandlockError(ctypes.get_errno(), f"landlock_add_rule({folder}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)

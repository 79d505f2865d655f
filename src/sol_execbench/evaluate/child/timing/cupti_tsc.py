"""Kernel records that survive Kineto on CUPTI 12.6 Update 2 to 13.0 (NVIDIA only).

At every profiler start Kineto sets its flag ``libkineto::use_cupti_tsc()`` and registers a
host-timestamp callback with CUPTI (``cuptiActivityRegisterTimestampCallback``, its TSC fast
path). CUPTI from CUDA 12.6 Update 2 up to 13.0 then writes kernel records with a start of 0
(an NVIDIA-confirmed defect, fixed in CUPTI 13.1), and Kineto drops them as outside the
profiling window: ``torch.profiler`` returns CPU ops and launch calls but few or no kernels.
torch 2.11+cu130 ships such a CUPTI, and the device method saw no device records at all there.

``prepare()`` points this process's imports of that CUPTI function (their GOT slots, in the
libraries that hold Kineto) at a libc function that returns 0, so the callback is never
registered; ``after_start()`` then sets Kineto's flag to false so it reads CUPTI's own
nanosecond timestamps (CLOCK_REALTIME, the clock its CPU events are converted to) instead of
taking them for TSC ticks. Both run before the first profiler session of the process (a
callback registered once stays registered). Nothing is changed when the loaded CUPTI is not
affected, when Kineto's flag cannot be found, or with ``SOL_EXECBENCH_CUPTI_TSC_WORKAROUND=0``;
``=1`` applies it whatever the version. ``state()`` says what was done, for the timing note.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
from dataclasses import dataclass, field

ENV = "SOL_EXECBENCH_CUPTI_TSC_WORKAROUND"
REGISTER_SYMBOL = "cuptiActivityRegisterTimestampCallback"
FLAG_SYMBOL = "_ZN9libkineto13use_cupti_tscEv"  # bool& libkineto::use_cupti_tsc()
AFFECTED_MIN, FIXED_AT = 24, 130100  # CUPTI API versions: 24 is CUDA 12.6, 130100 is CUDA 13.1
_KINETO_HOSTS = ("torch", "kineto")  # libraries searched for Kineto's imports of CUPTI
_SLOT_TYPES = {"x86_64": (6, 7), "aarch64": (1025, 1026)}  # GLOB_DAT, JUMP_SLOT
_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_RTLD_NOW, _RTLD_NOLOAD = 2, 4


@dataclass
class State:
    applied: bool = False
    reason: str = "not attempted"
    cupti_version: int | None = None
    slots: list[str] = field(default_factory=list)
    flag_address: int | None = None


_memo: dict[str, State] = {}  # filled once; never rebound (the integrity snapshot watches module globals)


def state() -> State | None:
    return _memo.get("state")


# -- reading ELF files (64-bit little-endian) -------------------------------------------------

def _sections(f) -> list[tuple[str, int, int, int, int, int]]:
    """(name, type, offset, size, link, entsize) of every section."""
    head = f.read(64)
    if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    f.seek(shoff)
    raw = f.read(shentsize * shnum)
    entries = [struct.unpack_from("<IIQQQQIIQQ", raw, i * shentsize) for i in range(shnum)]
    if not entries or shstrndx >= shnum:
        return []
    f.seek(entries[shstrndx][4])
    names = f.read(entries[shstrndx][5])
    out = []
    for name_off, kind, _flags, _addr, offset, size, link, _info, _align, entsize in entries:
        name = names[name_off:names.find(b"\0", name_off)].decode(errors="replace")
        out.append((name, kind, offset, size, link, entsize))
    return out


def import_slots(path: str, symbol: str, slot_types: tuple[int, ...]) -> list[int]:
    """Offsets (from the load base) of the GOT slots through which ``path`` reaches ``symbol``."""
    wanted = symbol.encode()
    try:
        with open(path, "rb") as f:
            sections = _sections(f)
            dynsym = next((s for s in sections if s[1] == 11), None)  # SHT_DYNSYM
            if dynsym is None:
                return []
            f.seek(sections[dynsym[4]][2])
            strtab = f.read(sections[dynsym[4]][3])
            if wanted + b"\0" not in strtab:
                return []
            f.seek(dynsym[2])
            symbols = f.read(dynsym[3])
            offsets = []
            for _name, kind, offset, size, link, entsize in sections:
                if kind != 4 or entsize != 24 or sections[link][1] != 11:  # SHT_RELA against .dynsym
                    continue
                f.seek(offset)
                table = f.read(size)
                for i in range(0, len(table) - 23, 24):
                    r_offset, r_info = struct.unpack_from("<QQ", table, i)
                    if (r_info & 0xFFFFFFFF) not in slot_types:
                        continue
                    name_off, = struct.unpack_from("<I", symbols, (r_info >> 32) * 24)
                    if strtab[name_off:name_off + len(wanted) + 1] == wanted + b"\0":
                        offsets.append(r_offset)
            return offsets
    except (OSError, struct.error, IndexError):
        return []


# -- the loaded process -------------------------------------------------------------------------

class _DlPhdrInfo(ctypes.Structure):
    _fields_ = [("dlpi_addr", ctypes.c_size_t), ("dlpi_name", ctypes.c_char_p)]


def loaded_objects() -> list[tuple[str, int]]:
    """(path, load base) of every loaded shared object, from ``dl_iterate_phdr``."""
    found: list[tuple[str, int]] = []
    libc = ctypes.CDLL(None)
    callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_DlPhdrInfo), ctypes.c_size_t, ctypes.c_void_p)

    def visit(info, _size, _data):
        name = info.contents.dlpi_name
        if name:
            found.append((name.decode(errors="replace"), int(info.contents.dlpi_addr)))
        return 0

    libc.dl_iterate_phdr(callback_type(visit), None)
    return found


def _page_protection(address: int) -> int | None:
    """The protection of the mapping holding ``address``, from /proc/self/maps."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if start <= address < end:
                return ((_PROT_READ if perms[0] == "r" else 0) | (_PROT_WRITE if perms[1] == "w" else 0)
                        | (_PROT_EXEC if perms[2] == "x" else 0))
    return None


def write_pointer(address: int, value: int) -> None:
    """Store ``value`` at ``address`` (a GOT slot), lifting RELRO's read-only page for the write."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = os.sysconf("SC_PAGE_SIZE")
    start = address & ~(page - 1)
    length = address + ctypes.sizeof(ctypes.c_void_p) - start
    protection = _page_protection(address)
    if protection is None:
        raise OSError(f"address {address:#x} is not mapped")
    writable = protection & _PROT_WRITE
    if not writable and libc.mprotect(start, length, protection | _PROT_WRITE) != 0:
        raise OSError(ctypes.get_errno(), "mprotect failed")
    try:
        ctypes.c_void_p.from_address(address).value = value
    finally:
        if not writable:
            libc.mprotect(start, length, protection)


def redirect_imports(symbol: str, target: int, hosts: tuple[str, ...] | None = None) -> list[str]:
    """Point every import of ``symbol`` in the loaded objects (whose path contains one of
    ``hosts``) at ``target``; returns 'library+0xoffset' for each slot changed."""
    slot_types = _SLOT_TYPES.get(platform.machine())
    if slot_types is None:
        return []
    changed = []
    for path, base in loaded_objects():
        if hosts is not None and not any(h in os.path.basename(path) for h in hosts):
            continue
        for offset in import_slots(path, symbol, slot_types):
            write_pointer(base + offset, target)
            changed.append(f"{os.path.basename(path)}+{offset:#x}")
    return changed


def _kineto_flag() -> int | None:
    """The address of Kineto's ``use_cupti_tsc`` bool (its accessor returns a reference)."""
    for path, _ in loaded_objects():
        if not any(h in os.path.basename(path) for h in _KINETO_HOSTS):
            continue
        try:
            accessor = ctypes.CDLL(path, mode=_RTLD_NOW | _RTLD_NOLOAD)[FLAG_SYMBOL]
        except (OSError, AttributeError):
            continue
        accessor.restype, accessor.argtypes = ctypes.c_void_p, []
        return accessor()
    return None


def _cupti_version() -> int | None:
    for path, _ in loaded_objects():
        if "libcupti" not in os.path.basename(path):
            continue
        try:
            lib = ctypes.CDLL(path, mode=_RTLD_NOW | _RTLD_NOLOAD)
            version = ctypes.c_uint32(0)
            if lib.cuptiGetVersion(ctypes.byref(version)) == 0:
                return int(version.value)
        except (OSError, AttributeError):
            continue
    return None


# -- the workaround --------------------------------------------------------------------------

def _decide() -> State:
    choice = os.environ.get(ENV, "auto").strip().lower()
    if choice in ("0", "off", "false", "no"):
        return State(reason=f"{ENV}=0")
    if not sys.platform.startswith("linux") or platform.machine() not in _SLOT_TYPES:
        return State(reason=f"not needed on {sys.platform}/{platform.machine()}")
    version = _cupti_version()
    forced = choice in ("1", "on", "true", "yes")
    if not forced and version is None:
        return State(reason="no CUPTI library is loaded")
    if not forced and not AFFECTED_MIN <= version < FIXED_AT:
        return State(reason=f"CUPTI {version} is not affected", cupti_version=version)
    flag = _kineto_flag()
    if flag is None:
        return State(reason="Kineto's use_cupti_tsc flag is not exported here: CUPTI left as it is",
                     cupti_version=version)
    libc = ctypes.CDLL(None)
    returns_zero = ctypes.cast(libc.sched_yield, ctypes.c_void_p).value  # int f(void) that returns 0
    try:
        slots = redirect_imports(REGISTER_SYMBOL, returns_zero, _KINETO_HOSTS)
    except OSError as exc:
        return State(reason=f"could not redirect {REGISTER_SYMBOL}: {exc}", cupti_version=version)
    if not slots:
        return State(reason=f"no import of {REGISTER_SYMBOL} found in the torch libraries", cupti_version=version)
    return State(applied=True, reason=f"CUPTI {version}: Kineto's TSC timestamp callback suppressed, native "
                 "timestamps used", cupti_version=version, slots=slots, flag_address=flag)


def prepare() -> State:
    """Apply the workaround once per process (before its first profiler session with CUDA)."""
    if "state" not in _memo:
        try:
            _memo["state"] = _decide()
        except Exception as exc:  # noqa: BLE001  (a probe: never the reason the method fails)
            _memo["state"] = State(reason=f"workaround not applied: {type(exc).__name__}: {exc}")
    return _memo["state"]


def after_start() -> None:
    """After each profiler start: Kineto has just set its TSC flag; read native timestamps."""
    current = _memo.get("state")
    if current is not None and current.applied and current.flag_address:
        ctypes.c_bool.from_address(current.flag_address).value = False

"""System calls a sandboxed program may not make: the kernel keyring's.

Keys live in the kernel per user (and per user namespace), not per process, mount or IPC namespace:
a key one program adds to its user keyring is there for the next program of the same uid (a warm
judge harness serves answer after answer as one uid; a leased uid is leased again later), and stays
pinned against the uid's key quota after the run. A session keyring inherited from the trainer
would even hand the program the trainer's keys. So the sandbox refuses ``add_key``,
``request_key`` and ``keyctl`` outright, as Docker's default seccomp profile does, with ``ENOSYS``
(what a kernel built without keys answers: programs and libraries already handle it).

The filter is a classic BPF program (``struct sock_filter``: code u16, jt u8, jf u8, k u32) built
here, without libseccomp: bubblewrap loads it (``--seccomp FD``) in the isolated modes, and the weak
modes install it with ``prctl`` before the program starts (``install``). Architectures it does not
know run without it (``ARCHES``), which ``sandbox info`` reports.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data
_X32 = 0x40000000  # x86_64's x32 ABI: the same numbers with this bit set

# audit architecture -> the keyring's system call numbers (add_key, request_key, keyctl)
ARCHES: dict[int, tuple[int, ...]] = {
    0xC000003E: (248, 249, 250, 248 | _X32, 249 | _X32, 250 | _X32),  # x86_64 (and x32)
    0x40000003: (286, 287, 288),  # i386, also on an x86_64 kernel
    0xC00000B7: (217, 218, 219),  # aarch64
    0x40000028: (309, 310, 311),  # arm (EABI)
}
_MACHINES = {"x86_64": 0xC000003E, "amd64": 0xC000003E, "aarch64": 0xC00000B7, "arm64": 0xC00000B7,
             "i386": 0x40000003, "i686": 0x40000003}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def keyring_filter() -> bytes:
    """The compiled filter: the keyring's calls of every known architecture answer ENOSYS; every
    other call is allowed."""
    deny = _insn(_RET_K, 0, 0, _ERRNO | errno.ENOSYS)
    allow = _insn(_RET_K, 0, 0, _ALLOW)
    prog = [_insn(_LD_W_ABS, 0, 0, _ARCH)]
    for arch, numbers in ARCHES.items():
        # per architecture: [jeq arch, skip its block] [ld nr] [jeq n -> deny]... [allow] [deny]
        block = [_insn(_LD_W_ABS, 0, 0, _NR)]
        for i, nr in enumerate(numbers):
            block.append(_insn(_JEQ_K, len(numbers) - i, 0, nr))  # to the deny after the allow
        block += [allow, deny]
        prog.append(_insn(_JEQ_K, 0, len(block), arch))
        prog += block
    prog.append(allow)  # an architecture this filter does not know
    return b"".join(prog)


def supported() -> bool:
    """Whether the filter knows this machine's architecture."""
    return _MACHINES.get(platform.machine().lower()) in ARCHES


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def prepared() -> tuple:
    """What ``install`` needs, made before the fork (``install`` runs between fork and exec and
    allocates nothing)."""
    program = keyring_filter()
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    return buf, prog


def install(prepared_filter: tuple, libc) -> None:
    """Install the filter on this process (and so on everything it starts): no_new_privs first,
    which an unprivileged process needs and a privileged one keeps."""
    _, prog = prepared_filter
    zero = ctypes.c_ulong(0)  # prctl reads unsigned longs: an int's upper half would be undefined
    if libc.prctl(38, ctypes.c_ulong(1), zero, zero, zero) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(prog), zero, zero) != 0:  # PR_SET_SECCOMP, FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")

#!/usr/bin/env python3
"""Lets the prebuilt llama.cpp libraries of `llama-cpp-py-sync` load on a
glibc older than 2.38 (Debian 12 has 2.36); scripts/local-model.sh runs it.

Those libraries are tagged manylinux2014 but were linked against glibc 2.38,
which renamed four functions for C23 (`__isoc23_strtol` and kin). Only those
four need 2.38, and they behave as the old ones for the decimal and hex
numbers llama.cpp parses. So this script

1. marks each library's need for the version GLIBC_2.38 weak (ELF
   `VER_FLG_WEAK`), which glibc's loader accepts when the version is
   missing, and
2. compiles `libisoc23.so`, the four functions under their new names, which
   the server must preload (`LD_PRELOAD`) to find them.

Usage: glibc-compat.py DIR — patches every `lib*.so*` in DIR in place and
writes DIR/libisoc23.so; prints that path. Running it twice is harmless.
"""

import pathlib
import struct
import subprocess
import sys

SHT_GNU_VERNEED = 0x6FFFFFFE
VER_FLG_WEAK = 0x2
VERSION = b"GLIBC_2.38"

SHIM = r"""
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
long __isoc23_strtol(const char *s, char **e, int b) { return strtol(s, e, b); }
unsigned long __isoc23_strtoul(const char *s, char **e, int b) { return strtoul(s, e, b); }
unsigned long long __isoc23_strtoull(const char *s, char **e, int b) { return strtoull(s, e, b); }
int __isoc23_sscanf(const char *s, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int n = vsscanf(s, f, ap);
    va_end(ap);
    return n;
}
"""


def weaken(path: pathlib.Path) -> int:
    """Marks the GLIBC_2.38 entries of an ELF64 little-endian file's version
    needs weak; returns how many it marked."""
    data = bytearray(path.read_bytes())
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return 0
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    marked = 0
    for section in sections:
        if section[1] != SHT_GNU_VERNEED:
            continue
        offset, strtab = section[4], sections[section[6]][4]
        while True:
            _, count, _, aux, following = struct.unpack_from("<HHIII", data, offset)
            at = offset + aux
            for _ in range(count):
                _, flags, _, name, next_aux = struct.unpack_from("<IHHII", data, at)
                end = data.index(b"\0", strtab + name)
                if bytes(data[strtab + name : end]) == VERSION and not flags & VER_FLG_WEAK:
                    struct.pack_into("<H", data, at + 4, flags | VER_FLG_WEAK)
                    marked += 1
                at += next_aux
            if not following:
                break
            offset += following
    if marked:
        path.write_bytes(data)
    return marked


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = pathlib.Path(sys.argv[1])
    libraries = sorted(p for p in folder.glob("lib*.so*") if p.name != "libisoc23.so")
    if not libraries:
        print(f"glibc-compat: no lib*.so* in {folder}", file=sys.stderr)
        return 1
    for library in libraries:
        weaken(library)
    source = folder / "isoc23.c"
    shim = folder / "libisoc23.so"
    source.write_text(SHIM)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(shim), str(source)], check=True)
    print(shim)
    return 0


if __name__ == "__main__":
    sys.exit(main())

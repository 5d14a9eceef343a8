"""What glibc a 64-bit little-endian ELF file (x86_64, aarch64) needs, read from its dynamic
symbols' versions, and the manylinux platform tag (PEP 600) that follows: scripts/build-wheel
names the wheel with it, scripts/check-wheel holds the wheel to the oldest glibc gpurr promises
(make test). Python standard library only; no objdump, so one reader serves every architecture."""
import re
import struct

ARCHES = {62: "x86_64", 183: "aarch64"}  # ELF e_machine
FLOOR = (2, 17)  # manylinux2014's glibc: no wheel is tagged older
LEGACY = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}  # PEP 600's aliases
# The libraries a manylinux wheel may link without bringing them (PEP 600 and auditwheel's
# policy: glibc's own).
SYSTEM_LIBS = {"libc.so.6", "libpthread.so.0", "libdl.so.2", "libm.so.6", "librt.so.1", "libutil.so.1",
               "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}

SHT_DYNSYM, SHT_DYNAMIC, SHT_VERNEED, SHT_VERSYM = 11, 6, 0x6FFFFFFE, 0x6FFFFFFF
DT_NEEDED = 1


class ELF:
    """The parts of an ELF file a wheel's platform depends on: arch (x86_64, aarch64), needed
    (DT_NEEDED libraries), versions ({symbol: (library, version)} of the symbols it needs at a
    version) and glibc ({(2, N): [the symbols that need GLIBC_2.N]})."""

    def __init__(self, data):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("not a 64-bit little-endian ELF file")
        machine = struct.unpack_from("<H", data, 18)[0]
        self.arch = ARCHES.get(machine, f"machine {machine}")
        shoff, = struct.unpack_from("<Q", data, 40)
        shentsize, shnum = struct.unpack_from("<HH", data, 58)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

        def section(kind):
            return next((s for s in sections if s[1] == kind), None)

        def string(strtab, off):
            start = sections[strtab][4] + off
            return data[start:data.index(b"\0", start)].decode()

        self.needed = []
        dynamic = section(SHT_DYNAMIC)
        if dynamic:
            for off in range(dynamic[4], dynamic[4] + dynamic[5], 16):
                tag, val = struct.unpack_from("<qQ", data, off)
                if tag == DT_NEEDED:
                    self.needed.append(string(dynamic[6], val))

        # Version index (the number .gnu.version gives each dynamic symbol) -> (library, version).
        names = {}
        verneed = section(SHT_VERNEED)
        if verneed:
            off = verneed[4]
            for _ in range(verneed[7]):
                _, cnt, file, aux, nxt = struct.unpack_from("<HHIII", data, off)
                a = off + aux
                for _ in range(cnt):
                    _, _, other, name, anext = struct.unpack_from("<IHHII", data, a)
                    names[other] = (string(verneed[6], file), string(verneed[6], name))
                    a += anext
                off += nxt
        self.versions, self.glibc = {}, {}
        dynsym, versym = section(SHT_DYNSYM), section(SHT_VERSYM)
        if dynsym and versym:
            for i in range(dynsym[5] // 24):
                st_name, = struct.unpack_from("<I", data, dynsym[4] + i * 24)
                ndx = struct.unpack_from("<H", data, versym[4] + i * 2)[0] & 0x7FFF
                if ndx not in names:
                    continue
                symbol = string(dynsym[6], st_name)
                self.versions[symbol] = names[ndx]
                m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", names[ndx][1])
                if m:
                    self.glibc.setdefault((int(m[1]), int(m[2])), []).append(symbol)

    def newest_glibc(self):
        """The newest glibc version any of the file's symbols needs, (2, N); FLOOR at least."""
        return max([FLOOR, *self.glibc])


def platform_tags(glibc, arch):
    """The wheel's platform tags for binaries that need glibc (2, N) on arch: PEP 600's
    manylinux_2_N_arch, then its legacy alias (manylinux2014_arch) where it has one, for pips
    older than 20.3."""
    tag = f"manylinux_{glibc[0]}_{glibc[1]}_{arch}"
    return [tag, f"{LEGACY[glibc]}_{arch}"] if glibc in LEGACY else [tag]


def parse_platform_tag(tag):
    """((2, N), arch) of a manylinux platform tag, legacy aliases included; None for another."""
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", tag)
    if m:
        return (int(m[1]), int(m[2])), m[3]
    for glibc, name in LEGACY.items():
        if tag.startswith(name + "_"):
            return glibc, tag[len(name) + 1:]
    return None

#!/usr/bin/env python3
"""Byte offsets of struct members from this kernel's BTF (/sys/kernel/btf/vmlinux).
   btf.py STRUCT.MEMBER[.MEMBER...] ...   prints  NAME OFFSET SIZE"""
import struct, sys
data = open('/sys/kernel/btf/vmlinux', 'rb').read()
magic, ver, flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from('<HBBIIIII', data, 0)
assert magic == 0xeB9F
tbase = hdr_len + type_off; sbase = hdr_len + str_off
def name(off):
    e = data.index(b'\0', sbase + off); return data[sbase + off:e].decode()
types = [None]
pos = tbase
while pos < tbase + type_len:
    name_off, info, size_or_type = struct.unpack_from('<III', data, pos); pos += 12
    kind = (info >> 24) & 0x1f; vlen = info & 0xffff; kflag = info >> 31
    t = {'name': name(name_off), 'kind': kind, 'size': size_or_type, 'type': size_or_type}
    if kind == 1: pos += 4                      # INT
    elif kind == 3: t['elem'] = struct.unpack_from('<III', data, pos)[0]; t['nelems'] = struct.unpack_from('<III', data, pos)[2]; pos += 12  # ARRAY
    elif kind in (4, 5):                        # STRUCT, UNION
        ms = []
        for i in range(vlen):
            mn, mt, mo = struct.unpack_from('<III', data, pos); pos += 12
            ms.append((name(mn), mt, (mo & 0xffffff) if kflag else mo))
        t['members'] = ms
    elif kind == 6: pos += 8 * vlen             # ENUM
    elif kind == 13: pos += 8 * vlen            # FUNC_PROTO
    elif kind == 14: pos += 4                   # VAR
    elif kind == 15: pos += 12 * vlen           # DATASEC
    elif kind == 17: pos += 4                   # DECL_TAG
    elif kind == 19: pos += 12 * vlen           # ENUM64
    types.append(t)
def resolve(tid):
    while types[tid]['kind'] in (7, 8, 9, 10, 11, 18):  # TYPEDEF VOLATILE CONST RESTRICT ... TYPE_TAG
        tid = types[tid]['type']
    return tid
def size_of(tid):
    tid = resolve(tid); t = types[tid]
    if t['kind'] in (1, 4, 5, 6, 16, 19): return t['size']
    if t['kind'] == 2: return 8
    if t['kind'] == 3: return size_of(t['elem']) * t['nelems']
    return 0
def find_member(tid, mname):
    """(bit offset, type id) of mname in struct tid, looking into anonymous members."""
    t = types[resolve(tid)]
    for n, mt, mo in t.get('members', []):
        if n == mname: return mo, mt
        if n == '' and types[resolve(mt)]['kind'] in (4, 5):
            r = find_member(mt, mname)
            if r: return mo + r[0], r[1]
    return None
byname = {}
for i, t in enumerate(types):
    if t and t['kind'] == 4 and t['name'] and t['name'] not in byname: byname[t['name']] = i
for spec in sys.argv[1:]:
    parts = spec.split('.'); tid = byname[parts[0]]; off = 0
    for m in parts[1:]:
        r = find_member(tid, m)
        if r is None: print(spec, 'MISSING'); break
        off += r[0]; tid = r[1]
    else:
        print(spec, off // 8, size_of(tid))

"""gguf.py - a small GGUF v3 reader (standard library + numpy) for the training tools.

Owns: parsing the header, the metadata key/values and the tensor-info table of a GGUF file,
and decoding the tensor types the trained model uses (F32, F16, I2_S in the official
128-element block layout: byte (e/128)*32 + e%32, shift 6 - 2*((e%128)/32), codes 0/1/2 =
-1/0/+1, one float32 scale after the codes). It is an independent reader: it does not share
code with the C runtime, so the cross-check in crosscheck.py tests the runtime's reading too.
"""
import struct

import numpy as np

T_F32, T_F16, T_I2_S = 0, 1, 36

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v[0]

    def string(self):
        n = self.take("<Q")
        s = bytes(self.d[self.p:self.p + n])
        self.p += n
        return s.decode("utf-8", errors="surrogateescape")

    def value(self, t):
        if t in _SCALAR:
            return self.take(_SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et = self.take("<I")
            n = self.take("<Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError("unknown GGUF value type %d" % t)


class GGUF:
    """kv: dict key -> value; tensors: dict name -> (type, ne list, absolute offset)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        r = Reader(self.data)
        if r.take("<I") != 0x46554747:
            raise ValueError("%s: not a GGUF file" % path)
        ver = r.take("<I")
        if ver != 3:
            raise ValueError("%s: GGUF version %d (want 3)" % (path, ver))
        n_t, n_kv = r.take("<Q"), r.take("<Q")
        self.kv = {}
        for _ in range(n_kv):
            k = r.string()
            self.kv[k] = r.value(r.take("<I"))
        infos = []
        for _ in range(n_t):
            name = r.string()
            nd = r.take("<I")
            ne = [r.take("<Q") for _ in range(nd)]
            t = r.take("<I")
            off = r.take("<Q")
            infos.append((name, t, ne, off))
        align = self.kv.get("general.alignment", 32)
        base = (r.p + align - 1) // align * align
        self.tensors = {n: (t, ne, base + off) for n, t, ne, off in infos}

    def tensor(self, name):
        """float32 array of shape [ne1, ne0] (rows = output units); I2_S returns the ternary
        codes as int8 (-1/0/+1) and the scale as a second value."""
        t, ne, off = self.tensors[name]
        n = 1
        for x in ne:
            n *= x
        shape = list(reversed(ne))
        if t == T_F32:
            return np.frombuffer(self.data, np.float32, n, off).reshape(shape).copy()
        if t == T_F16:
            return np.frombuffer(self.data, np.float16, n, off).astype(np.float32).reshape(shape)
        if t == T_I2_S:
            raw = np.frombuffer(self.data, np.uint8, n // 4, off).reshape(-1, 32)
            # block of 32 bytes -> 128 elements: element j = byte j%32, shift 6 - 2*(j/32)
            codes = np.stack([(raw >> s) & 3 for s in (6, 4, 2, 0)], axis=1)  # [blk, 4, 32]
            tern = codes.reshape(-1).astype(np.int8) - 1
            if (codes == 3).any():
                raise ValueError("%s: I2_S code 3 (never written by the official packer)" % name)
            scale = struct.unpack_from("<f", self.data, off + n // 4)[0]
            return tern.reshape(shape), scale
        raise ValueError("%s: tensor type %d not supported here" % (name, t))

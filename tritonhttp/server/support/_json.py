"""JSON as Triton writes it: compact, insertion-ordered, raw UTF-8, RapidJSON numbers.

Triton serialises with RapidJSON, whose doubles come from the Grisu2 algorithm followed
by RapidJSON's own layout (``1e21``, ``1e-7``, ``3.0``, bare ``NaN``/``Infinity``). Grisu2
does not always pick the same 17th digit as Python's ``repr`` (FP32 ``0.3`` prints as
``0.30000001192092898``), so :func:`format_double` implements Grisu2 itself (from the
published algorithm) with two fast paths: integral values and a bounded memo of values
already formatted. :func:`format_doubles` does whole arrays (large ones vectorised with
numpy in :mod:`._grisu_vec`).
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

__all__ = [
    "dumps",
    "escape_bytes",
    "escape_str",
    "format_double",
    "format_doubles",
]

_M64 = (1 << 64) - 1
_HIDDEN = 1 << 52
_FRAC = _HIDDEN - 1
_POW10 = [10**i for i in range(20)]


def _cached_power(index: int) -> tuple[int, int]:
    """64-bit normalised significand and binary exponent of 10**(-348 + 8*index)."""
    k = -348 + 8 * index
    if k >= 0:
        n = 10**k
        e = n.bit_length() - 64
        f = n + (1 << e - 1) >> e if e > 0 else n << -e
    else:
        d = 10**-k
        # 2**s / d lands in [2**63, 2**64) for s = 63 + bit_length(d) (or one less).
        s = 63 + d.bit_length()
        f = ((1 << s) + d // 2) // d
        if f >= 1 << 64:
            s -= 1
            f = ((1 << s) + d // 2) // d
        elif f < 1 << 63:
            s += 1
            f = ((1 << s) + d // 2) // d
        e = -s
    if f >> 64:  # rounding overflowed
        f >>= 1
        e += 1
    return f, e


_CACHED = [_cached_power(i) for i in range(87)]


def _count_digits(n: int) -> int:
    # RapidJSON caps this at 9: DigitGen never sees a 10-digit integral part.
    for i, limit in enumerate((10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000)):
        if n < limit:
            return i + 1
    return 9


def _grisu2(value: float) -> tuple[str, int]:
    """Digits and decimal exponent of a positive finite double, as Grisu2 chooses them."""
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    biased = (bits >> 52) & 0x7FF
    frac = bits & _FRAC
    if biased:
        f, e = frac + _HIDDEN, biased - 1075
    else:
        f, e = frac, -1074
    # boundaries m+ and m-, normalised to a common exponent
    pf, pe = (f << 1) + 1, e - 1
    while not pf & (_HIDDEN << 1):
        pf <<= 1
        pe -= 1
    pf <<= 10
    pe -= 10
    if f == _HIDDEN:
        mf, me = (f << 2) - 1, e - 2
    else:
        mf, me = (f << 1) - 1, e - 1
    mf <<= me - pe
    # normalised value
    shift = 64 - f.bit_length()
    wf, _we = f << shift, e - shift
    # cached power
    dk = (-61 - pe) * 0.30102999566398114 + 347
    k = int(dk)
    if dk - k > 0.0:
        k += 1
    index = (k >> 3) + 1
    big_k = -(-348 + index * 8)
    cf, ce = _CACHED[index]
    w_f = (wf * cf + (1 << 63)) >> 64
    p_f = ((pf * cf + (1 << 63)) >> 64) - 1
    m_f = ((mf * cf + (1 << 63)) >> 64) + 1
    p_e = pe + ce + 64
    delta = p_f - m_f
    # digit generation
    one_e = -p_e
    one_f = 1 << one_e
    wp_w = p_f - w_f
    p1 = p_f >> one_e
    p2 = p_f & (one_f - 1)
    kappa = _count_digits(p1)
    digits: list[int] = []
    while kappa > 0:
        div = _POW10[kappa - 1]
        d, p1 = divmod(p1, div)
        if d or digits:
            digits.append(d)
        kappa -= 1
        tmp = (p1 << one_e) + p2
        if tmp <= delta:
            big_k += kappa
            _round(digits, delta, tmp, _POW10[kappa] << one_e, wp_w)
            return "".join(map(str, digits)), big_k
    while True:
        p2 *= 10
        delta *= 10
        d = p2 >> one_e
        if d or digits:
            digits.append(d)
        p2 &= one_f - 1
        kappa -= 1
        if p2 < delta:
            big_k += kappa
            idx = -kappa
            # The RapidJSON Triton links weeds only while idx < 9 (a guard against reading
            # past its 10-entry power table); beyond that the last digit is left as is.
            scale = (wp_w * _POW10[idx]) & _M64 if idx < 9 else 0
            _round(digits, delta, p2, one_f, scale)
            return "".join(map(str, digits)), big_k


def _round(digits: list[int], delta: int, rest: int, ten_kappa: int, wp_w: int) -> None:
    while (
        rest < wp_w
        and delta - rest >= ten_kappa
        and (rest + ten_kappa < wp_w or wp_w - rest > rest + ten_kappa - wp_w)
    ):
        digits[-1] -= 1
        rest += ten_kappa


def _layout(digits: str, k: int) -> str:
    """RapidJSON's Prettify: where the point goes and when to switch to exponents."""
    length = len(digits)
    kk = length + k
    if k >= 0 and kk <= 21:
        return digits + "0" * k + ".0"
    if 0 < kk <= 21:
        return digits[:kk] + "." + digits[kk:]
    if -6 < kk <= 0:
        return "0." + "0" * -kk + digits
    mantissa = digits if length == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{kk - 1}"


def _format_uncached(x: float) -> str:
    if x != x:
        return "NaN"
    if x == math.inf:
        return "Infinity"
    if x == -math.inf:
        return "-Infinity"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if x < 0:
        digits, k = _grisu2(-x)
        return "-" + _layout(digits, k)
    digits, k = _grisu2(x)
    return _layout(digits, k)


_MEMO: dict[float, str] = {}
_MEMO_LIMIT = 1 << 16
_INTEGRAL_LIMIT = 1e15


def format_double(x: float) -> str:
    """One double as Triton's RapidJSON writes it."""
    s = _MEMO.get(x)
    if s is not None:
        return s
    if x == 0.0:  # (not memoised: 0.0 == -0.0 would mix the two up)
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if -_INTEGRAL_LIMIT < x < _INTEGRAL_LIMIT and x.is_integer():
        s = f"{int(x)}.0"
    else:
        s = _format_uncached(x)
    if x == x:  # NaN never matches
        if len(_MEMO) >= _MEMO_LIMIT:
            _MEMO.clear()
        _MEMO[x] = s
    return s


_VECTOR_THRESHOLD = 64


def format_doubles(values: np.ndarray[Any, Any]) -> str:
    """Comma-joined RapidJSON text of a float array (any float dtype; widened to double)."""
    flat = values.reshape(-1)
    n = flat.size
    if n < _VECTOR_THRESHOLD:
        # (tolist widens FP16/FP32 to the same doubles astype would)
        values_list = flat.tolist()
        texts = list(map(_MEMO.get, values_list))  # (None: not memoised, or a zero)
        if None in texts:
            for i, text in enumerate(texts):
                if text is None:
                    texts[i] = format_double(values_list[i])
        return ",".join(texts)  # type: ignore[arg-type]
    if flat.dtype != np.float64:
        flat = flat.astype(np.float64)
    # whole numbers (the common case in tests and demos) print as "<int>.0"
    with np.errstate(invalid="ignore"):
        integral = (np.abs(flat) < _INTEGRAL_LIMIT) & (flat == np.trunc(flat))
    if bool(integral.all()) and not bool(np.signbit(flat[flat == 0.0]).any()):
        return ".0,".join(map(str, flat.astype(np.int64).tolist())) + ".0"
    from ._grisu_vec import format_doubles_vectorised

    return format_doubles_vectorised(flat)


# ----------------------------------------------------------------------------- strings

_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_ESCAPES[ord('"')] = '\\"'
_ESCAPES[ord("\\")] = "\\\\"
_NEEDS_ESCAPE = frozenset(_ESCAPES)
_ESCAPE_BYTES = set(_NEEDS_ESCAPE)


def escape_str(s: str) -> str:
    """A JSON string literal (with quotes) for ``s``: RapidJSON escapes, raw non-ASCII."""
    return '"' + s.translate(_ESCAPES) + '"'


def escape_bytes(b: bytes) -> bytes:
    """A JSON string literal for raw bytes, copied as they are apart from the escapes."""
    if _ESCAPE_BYTES.isdisjoint(b):
        return b'"' + b + b'"'
    return b'"' + b.decode("latin-1").translate(_ESCAPES).encode("latin-1") + b'"'


# ----------------------------------------------------------------------------- values


def _write(obj: object, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, str):
        out.append(escape_str(obj))
    elif isinstance(obj, int):
        out.append(str(int(obj)))
    elif isinstance(obj, float):
        out.append(format_double(obj))
    elif isinstance(obj, dict):
        out.append("{")
        first = True
        for k, v in obj.items():
            if not first:
                out.append(",")
            first = False
            out.append(escape_str(str(k)))
            out.append(":")
            _write(v, out)
        out.append("}")
    elif isinstance(obj, (list, tuple)):
        out.append("[")
        first = True
        for v in obj:
            if not first:
                out.append(",")
            first = False
            _write(v, out)
        out.append("]")
    elif isinstance(obj, bytes):
        out.append(escape_bytes(obj).decode("latin-1"))
    elif isinstance(obj, np.generic):
        _write(obj.item(), out)
    else:
        raise TypeError(f"cannot write {type(obj).__name__} as JSON")


def dumps(obj: object) -> bytes:
    """Compact JSON bytes for ``obj`` (dict order kept, numbers as RapidJSON prints them)."""
    out: list[str] = []
    _write(obj, out)
    text = "".join(out)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # bytes written via latin-1 round-trip as surrogates
        return text.encode("utf-8", "surrogateescape")

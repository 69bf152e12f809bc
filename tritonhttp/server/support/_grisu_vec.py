"""Grisu2 + RapidJSON layout for whole float64 arrays, with numpy (no per-value Python).

The same algorithm as :func:`tritonhttp.server.support._json._grisu2`, one step at a time over
every value at once: 64x64-bit products from 32-bit halves, the digit loop run with masks
until every value has stopped, then the layout written into a character matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["format_doubles_vectorised"]

_U = np.uint64
_M32 = _U(0xFFFFFFFF)
_FRAC = _U((1 << 52) - 1)
_HIDDEN = _U(1 << 52)
_POW10 = np.array([10**i for i in range(20)], dtype=np.uint64)
_WIDTH = 27  # sign + 21 digits + ".0" fits; so do "0.00000" + 17 digits and "d.dddde-308"


def _cached_tables() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    from ._json import _CACHED

    f = np.array([c[0] for c in _CACHED], dtype=np.uint64)
    e = np.array([c[1] for c in _CACHED], dtype=np.int64)
    return f, e


_CF, _CE = _cached_tables()


def _bitlen(v: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    v = v.copy()
    n = np.zeros(v.shape, dtype=np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = v >= _U(1 << s)
        v = np.where(big, v >> _U(s), v)
        n += np.where(big, s, 0)
    return n + (v > 0)


def _mul(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """High 64 bits of a*b, rounded (RapidJSON's DiyFp multiply)."""
    a_hi, a_lo = a >> _U(32), a & _M32
    b_hi, b_lo = b >> _U(32), b & _M32
    ac = a_hi * b_hi
    bc = a_lo * b_hi
    ad = a_hi * b_lo
    bd = a_lo * b_lo
    tmp = (bd >> _U(32)) + (ad & _M32) + (bc & _M32) + _U(1 << 31)
    high: np.ndarray[Any, Any] = ac + (ad >> _U(32)) + (bc >> _U(32)) + (tmp >> _U(32))
    return high


def _weed(
    digits: np.ndarray[Any, Any],
    length: np.ndarray[Any, Any],
    rows: np.ndarray[Any, Any],
    delta: np.ndarray[Any, Any],
    rest: np.ndarray[Any, Any],
    ten_kappa: np.ndarray[Any, Any],
    wp_w: np.ndarray[Any, Any],
) -> None:
    """GrisuRound for the given rows: move the last digit towards the value."""
    last = length[rows] - 1
    rest = rest.copy()
    with np.errstate(over="ignore"):
        while True:
            cond = (
                (rest < wp_w)
                & (delta - rest >= ten_kappa)
                & ((rest + ten_kappa < wp_w) | (wp_w - rest > rest + ten_kappa - wp_w))
            )
            if not cond.any():
                return
            digits[rows[cond], last[cond]] -= 1
            rest = np.where(cond, rest + ten_kappa, rest)


def _grisu(
    x: np.ndarray[Any, Any],
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(digits matrix, digit counts, decimal exponents) of positive finite doubles."""
    n = x.size
    bits = x.view(np.uint64)
    biased = (bits >> _U(52)) & _U(0x7FF)
    frac = bits & _FRAC
    normal = biased != 0
    f = np.where(normal, frac + _HIDDEN, frac)
    e = np.where(normal, biased.astype(np.int64) - 1075, -1074)
    # upper boundary, normalised so that bit 63 is set
    pf = (f << _U(1)) + _U(1)
    pe = e - 1
    shift = 54 - _bitlen(pf)
    pf = pf << shift.astype(np.uint64)
    pe = pe - shift
    pf = pf << _U(10)
    pe = pe - 10
    # lower boundary at the same exponent
    pow2 = f == _HIDDEN
    mf = np.where(pow2, (f << _U(2)) - _U(1), (f << _U(1)) - _U(1))
    me = np.where(pow2, e - 2, e - 1)
    mf = mf << (me - pe).astype(np.uint64)
    # the value itself, normalised
    wshift = 64 - _bitlen(f)
    wf = f << wshift.astype(np.uint64)
    # cached power of ten
    dk = (-61 - pe) * 0.30102999566398114 + 347
    k = dk.astype(np.int64)
    k += (dk - k) > 0.0
    index = (k >> 3) + 1
    big_k = -(-348 + index * 8)
    cf = _CF[index]
    ce = _CE[index]
    with np.errstate(over="ignore"):
        w_f = _mul(wf, cf)
        p_f = _mul(pf, cf) - _U(1)
        m_f = _mul(mf, cf) + _U(1)
    one_e = -(pe + ce + 64)
    one_e_u = one_e.astype(np.uint64)
    one_f = _U(1) << one_e_u
    delta = p_f - m_f
    wp_w = p_f - w_f
    p1 = p_f >> one_e_u
    p2 = p_f & (one_f - _U(1))
    kappa = np.ones(n, dtype=np.int64)
    for i in range(1, 9):
        kappa += p1 >= _POW10[i]
    digits = np.zeros((n, 20), dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    live: np.ndarray[Any, Any] = np.arange(n)
    # integral part: kappa digits of p1
    while live.size:
        kp = kappa[live]
        div = _POW10[kp - 1]
        d = p1[live] // div
        p1[live] = p1[live] % div
        write = (d != 0) | (length[live] > 0)
        wr = live[write]
        digits[wr, length[wr]] = d[write].astype(np.int64)
        length[wr] += 1
        kp = kp - 1
        kappa[live] = kp
        tmp = (p1[live] << one_e_u[live]) + p2[live]
        stop = tmp <= delta[live]
        if stop.any():
            rows = live[stop]
            big_k[rows] += kp[stop]
            ten = _POW10[kp[stop]] << one_e_u[rows]
            _weed(digits, length, rows, delta[rows], tmp[stop], ten, wp_w[rows])
        live = live[~stop & (kp > 0)]
    # fractional part, for values whose integral digits did not suffice
    live = np.nonzero(kappa == 0)[0]
    live = live[(((p1[live] << one_e_u[live]) + p2[live]) > delta[live])]
    with np.errstate(over="ignore"):
        while live.size:
            p2[live] *= _U(10)
            delta[live] *= _U(10)
            d = (p2[live] >> one_e_u[live]).astype(np.int64)
            write = (d != 0) | (length[live] > 0)
            wr = live[write]
            digits[wr, length[wr]] = d[write]
            length[wr] += 1
            p2[live] &= one_f[live] - _U(1)
            kappa[live] -= 1
            stop = p2[live] < delta[live]
            if stop.any():
                rows = live[stop]
                big_k[rows] += kappa[rows]
                idx = -kappa[rows]
                scale = np.where(idx < 9, _POW10[np.minimum(idx, 19)], _U(0))
                _weed(digits, length, rows, delta[rows], p2[rows], one_f[rows], wp_w[rows] * scale)
            live = live[~stop]
    return digits, length, big_k


def format_doubles_vectorised(values: np.ndarray[Any, Any]) -> str:
    """Comma-joined RapidJSON text of a 1-D float64 array."""
    x = np.ascontiguousarray(values, dtype=np.float64)
    n = x.size
    out = np.zeros((n, _WIDTH + 1), dtype=np.uint8)
    out[:, _WIDTH] = ord(",")
    neg = np.signbit(x)
    finite = np.isfinite(x)
    regular = finite & (x != 0.0)
    rows = np.nonzero(regular)[0]
    if rows.size:
        digits, length, k = _grisu(np.abs(x[rows]))
        sign = neg[rows].astype(np.int64)
        out[rows[sign == 1], 0] = ord("-")
        kk = length + k
        cat_a = (k >= 0) & (kk <= 21)
        cat_b = ~cat_a & (kk > 0) & (kk <= 21)
        cat_c = ~cat_a & ~cat_b & (kk > -6) & (kk <= 0)
        cat_d = ~(cat_a | cat_b | cat_c)
        # digits
        j = np.arange(digits.shape[1])[None, :]
        valid = j < length[:, None]
        col = np.broadcast_to(j, digits.shape).copy()
        col = np.where(cat_b[:, None] & (j >= kk[:, None]), col + 1, col)
        col = np.where(cat_c[:, None], col + 2 - kk[:, None], col)
        col = np.where(cat_d[:, None] & (j >= 1), col + 1, col)
        col = col + sign[:, None]
        r_i, j_i = np.nonzero(valid)
        out[rows[r_i], col[r_i, j_i]] = (digits[r_i, j_i] + ord("0")).astype(np.uint8)
        cols = np.arange(_WIDTH)[None, :]
        base = sign[:, None]
        # A: zeros then ".0"
        a_rows = np.nonzero(cat_a)[0]
        if a_rows.size:
            start = base[a_rows] + length[a_rows, None]
            zeros = (cols >= start) & (cols < start + k[a_rows, None])
            block = out[rows[a_rows], :_WIDTH]
            block[zeros] = ord("0")
            dot = (start + k[a_rows, None])[:, 0]
            block[np.arange(a_rows.size), dot] = ord(".")
            block[np.arange(a_rows.size), dot + 1] = ord("0")
            out[rows[a_rows], :_WIDTH] = block
        # B: the point after kk digits
        b_rows = np.nonzero(cat_b)[0]
        if b_rows.size:
            out[rows[b_rows], sign[b_rows] + kk[b_rows]] = ord(".")
        # C: "0." and zeros
        c_rows = np.nonzero(cat_c)[0]
        if c_rows.size:
            s = sign[c_rows]
            out[rows[c_rows], s] = ord("0")
            out[rows[c_rows], s + 1] = ord(".")
            start = (s + 2)[:, None]
            zeros = (cols >= start) & (cols < start - kk[c_rows, None])
            block = out[rows[c_rows], :_WIDTH]
            block[zeros] = ord("0")
            out[rows[c_rows], :_WIDTH] = block
        # D: d[.ddd]e[-]x
        d_rows = np.nonzero(cat_d)[0]
        if d_rows.size:
            s = sign[d_rows]
            ln = length[d_rows]
            multi = ln > 1
            out[rows[d_rows[multi]], s[multi] + 1] = ord(".")
            pos = s + np.where(multi, ln + 1, 1)
            out[rows[d_rows], pos] = ord("e")
            exp = kk[d_rows] - 1
            pos = pos + 1
            neg_e = exp < 0
            out[rows[d_rows[neg_e]], pos[neg_e]] = ord("-")
            pos = pos + neg_e
            mag = np.abs(exp)
            ndig = 1 + (mag >= 10) + (mag >= 100)
            for place in range(3):
                have = ndig > place
                div = 10 ** np.maximum(ndig - 1 - place, 0)
                digit = (mag // div) % 10
                out[rows[d_rows[have]], (pos + place)[have]] = (digit[have] + ord("0")).astype(
                    np.uint8
                )
    for mask, text in (
        (finite & (x == 0.0) & ~neg, b"0.0"),
        (finite & (x == 0.0) & neg, b"-0.0"),
        (np.isnan(x), b"NaN"),
        (np.isposinf(x), b"Infinity"),
        (np.isneginf(x), b"-Infinity"),
    ):
        which = np.nonzero(mask)[0]
        if which.size:
            out[which, : len(text)] = np.frombuffer(text, dtype=np.uint8)
    flat = out.reshape(-1)
    joined: str = flat[flat != 0].tobytes()[:-1].decode("ascii")
    return joined

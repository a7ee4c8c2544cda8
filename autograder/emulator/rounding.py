"""Floating-point results as an H200 rounds them, where numpy rounds only to nearest: the
directed modes (``.rz``, ``.rm``, ``.rp``), flush-to-zero (``.ftz``), saturation (``.sat``),
and fused multiply-adds rounded once. Each rule here was measured against the H200 by the
conformance suite (``tests/conformance``).

A result is worked out as its value rounded to nearest (``near``, in the result's type) and
the sign of what that rounding lost (``residual``: the exact result minus ``near``, as -1, 0
or +1), from error-free transformations: the sum of two floats is a float plus an exact error
(``two_sum``), so is a product (``two_product``); an f32 product is exact in f64, and the
sign of ``a - q * b`` says on which side of the quotient ``q`` the exact ``a / b`` lies. A
directed mode then moves ``near`` one step wherever it went the wrong way (``directed``).
Rounded to nearest twice (exact -> f64 -> f32), a result can land on a tie the first rounding
made: rounding the f64 to odd first (``to_odd``) keeps the second rounding right."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

DIRECTED = ("rz", "rm", "rp")
F32_NAN = np.array(0x7FFFFFFF, np.uint32).view(np.float32)  # every f32 NaN an H200's arithmetic gives
_TIE = np.uint64(1 << 28)  # an f64 whose 29 bits below f32's precision are 1000...0: a tie for f32
_BELOW_F32 = np.uint64((1 << 29) - 1)
TINY64 = 2.0**-960  # below it an f64 error term can fall under the subnormals: worked out exactly
_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's constant for f64


def two_sum(a, b):
    """(s, e): s = a + b rounded, s + e = a + b exactly (Knuth); e = 0 where s is not finite."""
    s = a + b
    b_part = s - a
    e = (a - (s - b_part)) + (b - b_part)
    return s, np.where(np.isfinite(s), e, 0.0)


def two_product(a, b):
    """(p, e): p = a * b rounded (f64), p + e = a * b exactly (Dekker), barring overflow and
    products below f64's normal range."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    with np.errstate(invalid="ignore", over="ignore"):
        e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, np.where(np.isfinite(p) & np.isfinite(e), e, 0.0)


def _split(x):
    with np.errstate(invalid="ignore", over="ignore"):
        c = _SPLIT * x
        hi = c - (c - x)
    hi = np.where(np.isfinite(hi), hi, x)
    return hi, x - hi


def to_odd(s, e):
    """``s + e`` (f64, exact) rounded to odd: ``s`` where exact, else the neighbour of ``s``
    toward ``e`` whose last bit is set. Rounding that to f32 (or f64 -> anything narrower by
    two bits or more) rounds the exact value once."""
    s = np.asarray(s, np.float64)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    nudge = (e != 0) & even & np.isfinite(s)
    return np.where(nudge, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def canonical(x):
    """An f32 result with its NaNs made the H200's (0x7FFFFFFF, whatever the operands' NaNs
    were: measured); other types as they are (f64 NaNs follow x86's rules there, as numpy's)."""
    x = np.asarray(x)
    if x.dtype != np.float32 or not x.size or not np.isnan(np.minimum.reduce(x, axis=None)):
        return x
    return np.where(np.isnan(x), F32_NAN, x)


def settle(out, total, x, y) -> None:
    """``out`` (f32) = ``total`` (x + y rounded to f64) rounded to f32, in place: where that
    second rounding would meet a tie the first one made, the exact sum is rounded once
    instead; NaNs made the H200's. ``x`` or ``y`` may be ``out`` itself (read first). A pass or
    two over the lanes more than the rounding when nothing needs it."""
    ties = np.flatnonzero((total.view(np.uint64) & _BELOW_F32) == _TIE)
    fixed = None
    if ties.size:
        xs, ys = (np.broadcast_to(v, total.shape).flat[ties] for v in (x, y))
        fixed = to_odd(*two_sum(xs.astype(np.float64), ys)).astype(np.float32)
    np.copyto(out, total, casting="unsafe")
    if np.isnan(np.minimum.reduce(total, axis=None)):
        out[np.isnan(out)] = F32_NAN
    if fixed is not None:
        out.flat[ties] = fixed


def sign(x) -> np.ndarray:
    """-1, 0 or +1 (0 for NaN: a residual of an exact infinity or a NaN moves nothing)."""
    return np.nan_to_num(np.sign(x), nan=0.0)


def directed(near, residual, mode: str | None):
    """``near`` moved one step where a directed ``mode`` rounds the other way."""
    if mode not in DIRECTED:
        return near
    near = np.asarray(near)
    below, above = residual < 0, residual > 0  # where the exact result lies from near
    if mode == "rm":
        step, toward = below, -np.inf
    elif mode == "rp":
        step, toward = above, np.inf
    else:
        step, toward = ((near > 0) & below) | ((near < 0) & above), 0.0
    return np.where(step, np.nextafter(near, near.dtype.type(toward)), near)


def flush(x):
    """``.ftz``: subnormal f32 values become zeros of their sign."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        return x
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x)


def saturate(x):
    """``.sat``: clamped to [0, 1]; NaN and -0 become +0 (measured)."""
    x = np.asarray(x)
    return np.where(x > 0, np.minimum(x, x.dtype.type(1)), x.dtype.type(0))


# ----- each operation: (near, residual) ------------------------------------------------------
def add(a, b, dt, mode=None):
    if dt == np.float64:
        s, e = two_sum(a, b)
        near, residual = s, _overflowed(s, sign(e), a, b)
    else:
        s, e = two_sum(a.astype(np.float64), b)
        near = to_odd(s, e).astype(dt)
        residual = sign((s - near) + e)
    return _zero_sum(near, residual, a, b, mode), residual


def multiply(a, b, dt, mode=None):
    if dt == np.float64:
        p, e = two_product(a, b)
        near, residual = p, _overflowed(p, sign(e), a, b)
        lanes = _extreme(p, a, b) | _underflowed(p, a, b)
        return _exactly(near, residual, lambda k: Fraction(a[k]) * Fraction(b[k]), lanes, (a, b))
    p = a.astype(np.float64) * b  # exact
    near = p.astype(dt)
    return near, sign(p - near)


def fma(a, b, c, dt, mode=None):
    if dt == np.float64:  # Boldo and Melquiond: the low parts summed to odd, then one rounding
        with np.errstate(invalid="ignore", over="ignore"):
            uh, ul = two_product(a, b)
            th, tl = two_sum(c, uh)
            v, w = two_sum(tl, ul)
            near = np.where(np.isfinite(th), th + to_odd(v, w), a * b + c)
        residual = _overflowed(near, sign((th - near) + v) * np.isfinite(th), a, b, c)
        near = np.where((th == 0) & (v == 0) & (w == 0), a * b + c, near)  # exactly zero: IEEE's sign
        exact = lambda k: Fraction(a[k]) * Fraction(b[k]) + Fraction(c[k])  # noqa: E731
        lanes = _extreme(near, a, b, c, uh) | _underflowed(uh, a, b)
        near, residual = _exactly(near, residual, exact, lanes, (a, b, c), rounded=True)
        return _zero_sum(near, residual, a * b, c, mode), residual
    p = a.astype(np.float64) * b  # exact
    s, e = two_sum(p, c.astype(np.float64))
    near = to_odd(s, e).astype(dt)
    residual = sign((s - near) + e)
    return _zero_sum(near, residual, p, c, mode), residual


def divide(a, b, dt, mode=None):
    with np.errstate(divide="ignore", invalid="ignore"):
        if dt == np.float64:
            q = a / b
            ph, pl = two_product(q, b)
            residual = sign(((a - ph) - pl) * np.sign(b))
            exact = lambda k: Fraction(a[k]) / Fraction(b[k])  # noqa: E731
            lanes = (_extreme(q, a, b) | _underflowed(q, a)) & (b != 0)
            return _exactly(q, residual, exact, lanes, (a, b))
        near = (a.astype(np.float64) / b).astype(dt)
        return near, sign((a.astype(np.float64) - near.astype(np.float64) * b) * np.sign(b))


def square_root(a, dt, mode=None):
    with np.errstate(invalid="ignore"):
        if dt == np.float64:
            q = np.sqrt(a)
            ph, pl = two_product(q, q)
            residual = sign((a - ph) - pl)
            above = lambda k: Fraction(a[k]) - Fraction(float(q[k])) ** 2  # noqa: E731
            return _exactly(q, residual, above, _extreme(q, a) & (a > 0), (a,), gap=True)
        near = np.sqrt(a.astype(np.float64)).astype(dt)
        wide = near.astype(np.float64)
        return near, sign(a - wide * wide)


def _overflowed(near, residual, *operands):
    """Where rounding to nearest overflowed finite operands, the exact result is below the
    infinity (error-free transformations lose the error there)."""
    over = np.isinf(near) & np.logical_and.reduce([np.isfinite(o) for o in operands])
    return np.where(over, -np.sign(near), residual)


def _zero_sum(near, residual, x, y, mode):
    """An exactly zero sum ``x + y`` has the sign IEEE gives it: -0 from two -0s, else +0, but
    under ``.rm`` -0 unless both addends are +0."""
    exact_zero = (near == 0) & (residual == 0)
    if mode == "rm":
        both_plus = (x == 0) & (y == 0) & ~np.signbit(x) & ~np.signbit(y)
        zero = np.where(both_plus, near.dtype.type(0), near.dtype.type(-0.0))
    else:
        zero = np.asarray(x + y, near.dtype)
    return np.where(exact_zero, zero, near)


HUGE64 = 2.0**990  # above it Veltkamp's split overflows


def _extreme(*values) -> np.ndarray:
    """Where a value is tiny (not zero) or huge: error-free transformations may fail there."""
    out = np.zeros(np.shape(values[0]), bool)
    for v in values:
        magnitude = np.abs(v)
        out |= np.isfinite(v) & (((magnitude < TINY64) & (magnitude != 0)) | (magnitude > HUGE64))
    return out


def _underflowed(result, *factors) -> np.ndarray:
    """Where a product or quotient of nonzero factors rounded to zero."""
    return (result == 0) & np.logical_and.reduce([f != 0 for f in factors])


def _exactly(near, residual, exact, lanes, operands, rounded=False, gap=False):
    """(near, residual) worked out in rationals on ``lanes`` (with finite operands):
    ``exact(k)`` is lane ``k``'s exact result as a Fraction (``gap``: the exact result minus
    ``near`` already); ``rounded``: ``near`` is rounded from it too (a fused multiply-add)."""
    finite = np.logical_and.reduce([np.isfinite(o) for o in operands])
    lanes = np.flatnonzero(lanes & finite)
    if lanes.size == 0:
        return near, residual
    near, residual = np.array(near, np.float64), np.array(residual, np.float64)
    for k in lanes.tolist():
        value = exact(k)
        if rounded:
            near[k] = _nearest(value)
        if gap:
            difference = value
        elif np.isfinite(near[k]):
            difference = value - Fraction(float(near[k]))
        else:  # overflowed: the exact value lies toward zero from the infinity
            difference = -near[k]
        residual[k] = int(difference > 0) - int(difference < 0)
    return near, residual


def _nearest(value: Fraction) -> float:
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def narrowed(a, dt):
    """``a`` (a wider float, or an integer) as the float type ``dt``: (near, residual)."""
    a = np.asarray(a)
    if a.dtype.kind in "iu" and a.dtype.itemsize == 8:
        high = (a >> 32).astype(np.float64) * 2.0**32  # arithmetic shift for s64
        s, e = two_sum(high, (a & 0xFFFFFFFF).astype(np.float64))
        if dt == np.float64:
            return s, sign(e)
        near = to_odd(s, e).astype(dt)
        return near, sign((s - near) + e)
    wide = a.astype(np.float64)
    near = wide.astype(dt)
    return near, sign(wide - near.astype(np.float64))

"""difflib's matching blocks, found fast: `matching_blocks(a, b)` equals
`difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()` (as (i, j, n) tuples), block for
block (tests/traces/test_blocks.py checks it against difflib on random sequences and on the real traces).

difflib's `find_longest_match` is quadratic in the range it searches: for each element of `a` it walks every place
that element occurs in `b`. A decoder trace aligned by op class has a handful of distinct tokens over thousands of
calls, so each element occurs hundreds of times in `b` and one alignment of a Gemma-2 trace took ~10 s. Here the
same longest block is found by a binary search on its length: a block of length k exists iff some length-k window of
`a` equals one of `b` (a longer common block holds a shorter one), and windows are compared as byte strings (each
distinct element -> a fixed-width code), hashed in C. For the longest length K, the windows of `a` are tried from
the lowest i and the first that occurs in `b` is taken at its lowest j: difflib's tie-break (of the longest blocks,
the one that starts earliest in `a`, then earliest in `b`; without junk every longest block is maximal, so its
extension steps do nothing). The recursion on the two sides of each block, the sort and the merging of adjacent
blocks are difflib's own; a side's longest block is at most its parent's (shorter on the left, where one as long
would start before it), which bounds the search, and the search starts there and gallops: the blocks peeled off a
layer-periodic trace are mostly a layer long, so one or two probes usually settle a side.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Sequence


def _encode(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[bytes, bytes, int]:
    """Both sequences as byte strings of one fixed-width code per element (equal elements, equal codes), and that
    width in bytes."""
    codes: dict[Hashable, int] = {}
    ia = [codes.setdefault(x, len(codes)) for x in a]
    ib = [codes.setdefault(x, len(codes)) for x in b]
    typecode = "B" if len(codes) <= 1 << 8 else "H" if len(codes) <= 1 << 16 else "L"
    width = array(typecode).itemsize
    return array(typecode, ia).tobytes(), array(typecode, ib).tobytes(), width


def _first_window(a: bytes, b: bytes, w: int, alo: int, ahi: int, blo: int, bhi: int,
                  k: int) -> tuple[int, int] | None:
    """The lowest i, then the lowest j, with a[i:i+k] == b[j:j+k] inside the ranges (indices in elements), or
    None."""
    kw = k * w
    at = {b[j * w: j * w + kw]: j for j in range(bhi - k, blo - 1, -1)}  # descending: the lowest j stays
    for i in range(alo, ahi - k + 1):
        j = at.get(a[i * w: i * w + kw])
        if j is not None:
            return i, j
    return None


def _longest(a: bytes, b: bytes, w: int, alo: int, ahi: int, blo: int, bhi: int, bound: int,
             guess: int) -> tuple[int, int, int]:
    """difflib's `find_longest_match(alo, ahi, blo, bhi)` without junk, knowing no block is longer than `bound`:
    the longest length first galloped to from `guess` (0: none), then bisected."""
    best = (alo, blo, 0)
    lo, hi = 0, min(ahi - alo, bhi - blo, bound)  # a block of length lo is known (best); none is longer than hi

    def probe(k: int) -> bool:
        nonlocal lo, hi, best
        hit = _first_window(a, b, w, alo, ahi, blo, bhi, k)
        if hit is None:
            hi = k - 1
            return False
        lo, best = k, (hit[0], hit[1], k)
        return True

    if guess and lo < hi:
        step = 1
        if probe(min(guess, hi)):
            while lo < hi and probe(min(lo + step, hi)):
                step *= 2
        else:
            while lo < hi and not probe(max(hi - step + 1, lo + 1)):
                step *= 2
    while lo < hi:
        probe((lo + hi + 1) // 2)
    return best


def matching_blocks(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int, int]]:
    """`difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()`, as (i, j, n) tuples: the
    blocks a[i:i+n] == b[j:j+n] ascending, adjacent ones merged, ending with (len(a), len(b), 0)."""
    la, lb = len(a), len(b)
    ea, eb, w = _encode(a, b)
    queue = [(0, la, 0, lb, min(la, lb), 0)]
    blocks = []
    while queue:
        alo, ahi, blo, bhi, bound, guess = queue.pop()
        i, j, k = x = _longest(ea, eb, w, alo, ahi, blo, bhi, bound, guess)
        if k:
            blocks.append(x)
            if alo < i and blo < j:  # a block of length k there would start before i: none is that long
                queue.append((alo, i, blo, j, k - 1, k))
            if i + k < ahi and j + k < bhi:
                queue.append((i + k, ahi, j + k, bhi, k, k))
    blocks.sort()
    out = []
    i1 = j1 = k1 = 0
    for i2, j2, k2 in blocks:
        if i1 + k1 == i2 and j1 + k1 == j2:
            k1 += k2
        else:
            if k1:
                out.append((i1, j1, k1))
            i1, j1, k1 = i2, j2, k2
    if k1:
        out.append((i1, j1, k1))
    out.append((la, lb, 0))
    return out

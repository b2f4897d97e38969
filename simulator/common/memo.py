"""Every process-level memo of launchsim, registered in one place (issue 24: no hidden global caches).

A memo that belongs to an object with a lifetime lives on that object: the run's `engine/stepcost.StepCostCache`,
the `CostModel` of one profile (host samplers, eager passes, GEMM grid tables), a `model/kernels.Op` (its compiled-
path copy). What is left at module level are pure tables keyed BY VALUE (never by id()): the same key always gives
an equal value, so sharing them across runs in one process changes no figure, only the time to make it. Each is a
`Memo` made here by `memo(name, owner, bound)`:

- `name`: where it lives (module.variable), unique;
- `owner`: what it memoises and why it is process-wide (its docstring);
- `bound`: at most this many entries; `put` clears the memo when it is full (a bound on memory, not on
  correctness: a cleared entry is made again, equal).

`registered()` lists them; `clear_all()` forgets every entry (tests that want a cold process). tests/
test_architecture.py fails on any module-level mutable container or functools cache under simulator/ that is not
a `Memo` from here or on its short allowlist of non-memo state.
"""

from __future__ import annotations


class Memo(dict):
    """A bounded, named, value-keyed memo (a dict: lookups are dict lookups)."""

    __slots__ = ("name", "owner", "bound")

    def __init__(self, name: str, owner: str, bound: int):
        super().__init__()
        self.name, self.owner, self.bound = name, owner, int(bound)

    def put(self, key, value):
        """`self[key] = value` after clearing the memo if it holds `bound` entries; returns `value`."""
        if len(self) >= self.bound:
            self.clear()
        self[key] = value
        return value

    def __repr__(self) -> str:
        return f"Memo({self.name!r}, {len(self)}/{self.bound})"


_REGISTRY: dict[str, Memo] = {}  # name -> memo: the one registry (allowlisted in tests/test_architecture.py)


def memo(name: str, owner: str, bound: int) -> Memo:
    """A new registered memo (`name` must be new: one memo per name)."""
    if name in _REGISTRY:
        raise ValueError(f"memo {name!r} is registered already")
    if bound < 1:
        raise ValueError(f"memo {name!r}: bound must be positive, got {bound}")
    m = _REGISTRY[name] = Memo(name, owner, bound)
    return m


def registered() -> tuple[Memo, ...]:
    """Every registered memo, in registration order."""
    return tuple(_REGISTRY.values())


def clear_all() -> None:
    """Forget every entry of every registered memo."""
    for m in _REGISTRY.values():
        m.clear()

"""Reading users' JSON files (profiles, workloads, config.json, traces) safely, and pointing at a field.

`read_json(path, what, error)` returns (data, text): every problem is one `error` line naming the file (no such
file, a directory, binary or non-UTF-8 bytes, too large, malformed JSON with its line, nested too deep, NaN or
Infinity constants, which are not JSON). `field_error(where, text, loc, msg)` formats the house style
`FILE:LINE: field 'a.b[2]': msg`, with LINE found by walking the JSON text (`line_of`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from simulator.common.errors import UserError
from simulator.common.memo import memo

MAX_JSON_BYTES = 512 << 20  # a torch.profiler trace of a few steps is tens of MB; this is far above
_DEC = json.JSONDecoder()


def _no_constants(name: str):
    raise ValueError(f"{name} is not a JSON number")


# Only these spellings can parse to a non-finite float: the NaN / Infinity constants, an exponent of three or more
# digits (1e999) or a number literal of 309 or more digits. A text with none of them needs no walk; one that has
# one (maybe inside a string) gets the exact walk below. Substring tests on the text with its digits mapped to NUL,
# E to e and the signs removed, so that one test finds every exponent form (e, E, e+, e-, E+, E-; removing a sign
# can only join digits into a longer run, which at worst sends a clean text to the walk): C-speed, a regex over a
# 250 KB profile took 10 ms, six substring tests 3 ms, this 1 ms.
_DIGITS = str.maketrans({**{d: "\0" for d in "0123456789"}, "E": "e", "+": None, "-": None})


def _may_be_non_finite(text: str) -> bool:
    if "NaN" in text or "Infinity" in text:
        return True
    t = text.translate(_DIGITS)
    return "\0" * 309 in t or "e\0\0\0" in t


def _first_non_finite(data, text: str | None = None):
    """Location of the first NaN / Infinity (or 1e999, read as inf) in parsed JSON, or None (iterative walk; skipped
    when `text`, the JSON it was parsed from, has no spelling that could give one)."""
    if text is not None and not _may_be_non_finite(text):
        return None
    stack = [((), data)]
    while stack:
        loc, x = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            return loc, x
        if isinstance(x, dict):
            stack.extend((loc + (k,), v) for k, v in reversed(list(x.items())))
        elif isinstance(x, list):
            stack.extend((loc + (i,), v) for i, v in reversed(list(enumerate(x))))
    return None


def parse_json_text(text: str, where: str, error: type[UserError] = UserError):
    """json.loads with NaN/Infinity (and numbers too large for a float) refused as `FILE:LINE: field` errors and
    any syntax or nesting problem as one `error` line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deep") from None
    bad = _first_non_finite(data, text)
    if bad is not None:
        loc, x = bad
        raise field_error(where, text, loc, f"{x!r} is not a finite number (JSON has no NaN or Infinity)", error)
    return data


def read_bytes(path, what: str, error: type[UserError] = UserError, limit: int = MAX_JSON_BYTES) -> bytes:
    """A user's file as bytes, or one `error` line (missing, a directory, unreadable, too large)."""
    p = Path(path)
    if str(path) == "":
        raise error(f"no {what} file given (empty path)")
    try:
        if p.is_dir():
            raise error(f"{p}: is a directory, not a {what} file")
        if p.exists() and not p.is_file():
            raise error(f"{p}: not a regular file (a {what} file must be one)")
        size = p.stat().st_size
        if size > limit:
            raise error(f"{p}: {size:,} bytes is too large for a {what} file (limit {limit:,})")
        return p.read_bytes()
    except FileNotFoundError:
        raise error(f"{p}: no such {what} file") from None
    except OSError as e:
        raise error(f"{p}: cannot read {what} file ({e.strerror or e.__class__.__name__})") from None


def decode_text(raw: bytes, where: str, what: str, error: type[UserError] = UserError) -> str:
    if b"\x00" in raw[:8192]:
        raise error(f"{where}: binary data, not a {what} file (text)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise error(f"{where}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x})") from None


def read_text_file(path, what: str, error: type[UserError] = UserError, limit: int = MAX_JSON_BYTES) -> str:
    return decode_text(read_bytes(path, what, error, limit), str(path), what, error)


def read_json(path, what: str, error: type[UserError] = UserError, limit: int = MAX_JSON_BYTES):
    """(data, text) of a JSON file; any problem is one `error` line naming the file (and line)."""
    text = read_text_file(path, what, error, limit)
    if not text.strip():
        raise error(f"{path}: empty file, not a {what} file (JSON)")
    return parse_json_text(text, str(path), error), text


def format_loc(loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top>"


def _skip_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in " \t\r\n":
        i += 1
    return i


def position_of(text: str, loc) -> int:
    """Character offset of the value at `loc` (keys and list indices) in JSON `text`; as deep as it exists."""
    pos = _skip_ws(text, 0)
    try:
        for part in loc:
            pos = _skip_ws(text, pos)
            if pos >= len(text):
                break
            if text[pos] == "{" and not isinstance(part, int):
                i = _skip_ws(text, pos + 1)
                found = None
                while i < len(text) and text[i] != "}":
                    key, i = _DEC.raw_decode(text, i)
                    i = _skip_ws(text, i) + 1  # ':'
                    i = _skip_ws(text, i)
                    if key == str(part):
                        found = i
                        break
                    _, i = _DEC.raw_decode(text, i)
                    i = _skip_ws(text, i)
                    if i < len(text) and text[i] == ",":
                        i = _skip_ws(text, i + 1)
                if found is None:
                    break
                pos = found
            elif text[pos] == "[" and isinstance(part, int):
                i = _skip_ws(text, pos + 1)
                k = 0
                while i < len(text) and text[i] != "]" and k < part:
                    _, i = _DEC.raw_decode(text, i)
                    i = _skip_ws(text, i)
                    if i < len(text) and text[i] == ",":
                        i = _skip_ws(text, i + 1)
                    k += 1
                if k != part or i >= len(text) or text[i] == "]":
                    break
                pos = i
            else:
                break
    except (ValueError, RecursionError, IndexError):
        pass
    return pos


def line_of(text: str | None, loc) -> int:
    if not text:
        return 1
    return text.count("\n", 0, position_of(text, tuple(loc))) + 1


def field_error(where: str, text: str | None, loc, msg: str, error: type[UserError] = UserError) -> UserError:
    """`FILE:LINE: field 'a.b[2]': msg` as an `error`."""
    return error(f"{where}:{line_of(text, loc)}: field '{format_loc(loc)}': {msg}")


# --------------------------------------------------------------------------------------------- writing
def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_parts(path, (text,))


def atomic_write_parts(path: str | Path, parts) -> Path:
    """`path` written atomically from the pieces of text in `parts` (an iterable of str), each in turn, without
    joining them: a temporary file beside `path`, text mode, mode 0o644, `os.replace` (none left on an error)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # (and its random) only where a file is written: `predict --json` writes none

    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for part in parts:
                f.write(part)
        os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return p


def finite(obj):
    """A copy of a JSON-bound value with NaN and infinities as None: JSON has no NaN (`json.dumps` would write
    the non-standard token NaN, which strict readers reject)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if hasattr(obj, "tolist") or hasattr(obj, "item") or hasattr(obj, "model_dump"):
        return finite(_default(obj))
    return obj


def dumps(obj, **kw) -> str:
    """json.dumps that never writes NaN or Infinity (they become null).

    Without keyword arguments, and with `indent=2` alone (what `write_json` writes), the text is the same as
    `json.dumps(finite(obj), allow_nan=False, default=_default, **kw)` character for character, made in time
    linear in the size of `obj`: the C encoder writes each container of plain values (`indent=2` would otherwise
    run json's pure-Python encoder), and `finite`'s copy is made only where a NaN or infinity is found."""
    if not kw:
        try:
            return _COMPACT.encode(obj)
        except ValueError:  # a non-finite float somewhere: the copy with None in its place
            return json.dumps(finite(obj), allow_nan=False, default=_default)
    if kw == {"indent": 2}:
        return indented(obj)
    return json.dumps(finite(obj), allow_nan=False, default=_default, **kw)


_COMPACT = json.JSONEncoder(allow_nan=False, default=lambda o: _default(o))
_PLAIN = (str, int, float, type(None))  # bool is an int; subclasses (numpy float64, str enums) encode alike
_ENC = memo("common.jsonfile._ENC", "one JSON encoder per nesting depth, whose item separator is json's indent=2 "
            "line break at that depth: constant objects, made at first use", 64)


def _flat_encoder(depth: int) -> json.JSONEncoder:
    e = _ENC.get(depth)
    if e is None:
        e = _ENC.put(depth, json.JSONEncoder(allow_nan=False, separators=(",\n" + "  " * (depth + 1), ": ")))
    return e


def _key(k) -> str:
    """A dict key as json writes it (str, or float/int/bool/None turned into a string)."""
    if isinstance(k, str):
        return json.encoder.encode_basestring_ascii(k)
    if isinstance(k, (int, float)) or k is None:
        return json.encoder.encode_basestring_ascii(json.dumps(k, allow_nan=False))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


def indented(obj, known: dict[int, str] | None = None, depth: int = 0) -> str:
    """`dumps(obj, indent=2)`. `known`: id(value) -> `indented(value)` already made for a value inside `obj` (a
    sweep's rows, written alone and inside result.json): its text is reused, indented to its depth (JSON strings
    hold no raw line breaks, so every line break in it is the layout's). `depth`: the text `obj` has as an item
    at that depth of an enclosing document (`indented_list` joins such items)."""
    parts: list[str] = []
    _indented(obj, depth, parts, known or {})
    return "".join(parts)


def indented_list(items: list[str]) -> str:
    """`indented(list)` from the texts of its items, each `indented(item, depth=1)`."""
    if not items:
        return "[]"
    return "[\n  " + ",\n  ".join(items) + "\n]"


def _indented(obj, depth: int, out: list[str], known: dict[int, str] | None = None) -> None:
    """Append `json.dumps(finite(obj), indent=2, allow_nan=False, default=_default)`'s text for `obj` at `depth`."""
    if known:
        text = known.get(id(obj))
        if text is not None:
            out.append(text.replace("\n", "\n" + "  " * depth) if depth else text)
            return
    if isinstance(obj, _PLAIN):
        if isinstance(obj, float) and not math.isfinite(obj):
            out.append("null")
        else:
            out.append(_COMPACT.encode(obj))
        return
    if isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        if all(isinstance(v, _PLAIN) for v in obj.values()):  # one C call: '{"a": 1,\n    "b": 2}'
            try:
                text = _flat_encoder(depth).encode(obj)
            except ValueError:  # a non-finite value: written one by one below
                pass
            else:
                pad = "  " * (depth + 1)
                out.append("{\n" + pad + text[1:-1] + "\n" + "  " * depth + "}")
                return
        pad = "\n" + "  " * (depth + 1)
        first = True
        for k, v in obj.items():
            out.append(("{" if first else ",") + pad + _key(k) + ": ")
            first = False
            _indented(v, depth + 1, out, known)
        out.append("\n" + "  " * depth + "}")
        return
    if isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        if all(isinstance(v, _PLAIN) for v in obj):
            try:
                text = _flat_encoder(depth).encode(list(obj))
            except ValueError:
                pass
            else:
                out.append("[\n" + "  " * (depth + 1) + text[1:-1] + "\n" + "  " * depth + "]")
                return
        pad = "\n" + "  " * (depth + 1)
        for i, v in enumerate(obj):
            out.append(("[" if i == 0 else ",") + pad)
            _indented(v, depth + 1, out, known)
        out.append("\n" + "  " * depth + "]")
        return
    if hasattr(obj, "tolist") or hasattr(obj, "item") or hasattr(obj, "model_dump"):
        _indented(_default(obj), depth, out, known)
        return
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")  # as _default says


def write_json(path: str | Path, obj, known: dict[int, str] | None = None) -> Path:
    """`obj` as `dumps(obj, indent=2)` plus a line break; `known`: as `indented`'s."""
    return atomic_write_text(path, (indented(obj, known) if known else dumps(obj, indent=2)) + "\n")


def _default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "model_dump"):
        return o.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def read_text(path, what: str, error: type[UserError] = UserError) -> str:
    """A user's text file, or one `error` line: '<path>: no such <what> file', a folder, binary, not UTF-8..."""
    return read_text_file(path, what, error)


def validate_versioned(model, raw: object, where: str, version_key: str, version: int,
                       error: type[UserError], what: str, text: str | None = None):
    """Validate a versioned JSON document (a profile, a workload file) into pydantic `model`; any problem
    is one `error` line: not an object, wrong version, or the first field error with its path."""
    from pydantic import ValidationError

    if not isinstance(raw, dict):
        raise error(f"{where}: {what} must be a JSON object")
    v = raw.get(version_key)
    if v != version or isinstance(v, bool):
        raise error(f"{where}:{line_of(text, (version_key,))}: field '{version_key}': {version_key} is {v!r}, this launchsim "
                    f"reads version {version}")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise field_error(where, text, tuple(err["loc"]), err["msg"], error) from None
    except RecursionError:
        raise error(f"{where}: nested too deep") from None

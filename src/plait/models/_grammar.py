"""JSON schema → GBNF for `LocalModel`, honouring the constraints tools declare.

llama.cpp's converter (`llama_cpp.llama_grammar`) does most of the work; this module adds
what it leaves out, so that a value decoded under the grammar satisfies the schema:

- `minimum`, `maximum`, `exclusiveMinimum` and `exclusiveMaximum` on an integer: the
  grammar admits exactly the integers in range (at most 16 digits, as the converter's);
- the same on a number: the integers in range and, where every digit after the point keeps
  the value in range, decimals (a number's grammar may admit fewer values than the schema
  does, never one outside it);
- `pattern` together with `maxLength` on a string: the converter uses the pattern alone,
  so its unbounded repetitions (`*`, `+`, `{m,}`) are bounded by `maxLength`. For a pattern
  that is one repeated character class (`^[0-9+*/() .-]+$`) that is exactly `maxLength`;
  for others each repetition is bounded, so the string always ends.

`enum`, `const` and `maxLength`/`minLength` without a pattern are the converter's own.
Only the engine process imports this module (it needs `llama_cpp`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from llama_cpp import llama_grammar

__all__ = ["bound_pattern", "int_range", "schema_to_gbnf"]

_DIGITS = 16  # the longest integer the grammar writes, as llama.cpp's own integer rule
_LIMIT = 10**_DIGITS - 1
_FRACTION = '"." [0-9]{0,5} [1-9]'  # a decimal part that is never zero: 2.5, never 2.0


def schema_to_gbnf(schema: Mapping[str, Any]) -> str:
    """Return the GBNF grammar (its root rule `root`) of the JSON values `schema` admits."""
    converter = _Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    resolved = converter.resolve_refs(json.loads(json.dumps(schema)), "schema")
    converter.visit(resolved, "")
    return str(converter.format_grammar())


_SchemaConverter: Any = llama_grammar.SchemaConverter  # untyped


class _Converter(_SchemaConverter):  # type: ignore[misc]
    """llama.cpp's converter, with numeric ranges and patterns bounded by `maxLength`."""

    def visit(self, schema: dict[str, Any], name: str) -> str:
        kind = schema.get("type")
        ranged = any(k in schema for k in _BOUNDS)
        if kind in ("integer", "number") and ranged and "enum" not in schema:
            lo, hi = _bounds(schema, kind == "integer")
            body = _number_rule(lo, hi, fractions=kind == "number")
            rule: str = self._add_rule(name or "root", f"({body}) space")
            return rule
        if (
            kind in (None, "string")
            and isinstance(schema.get("pattern"), str)
            and isinstance(schema.get("maxLength"), int)
        ):
            schema = {**schema, "pattern": bound_pattern(schema["pattern"], schema["maxLength"])}
        visited: str = super().visit(schema, name)
        return visited


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _bounds(schema: Mapping[str, Any], integer: bool) -> tuple[float, float]:
    """Return the closed range [lo, hi] of values the schema admits (floats, may be inf)."""
    lo, hi = -math.inf, math.inf
    if isinstance(schema.get("minimum"), int | float):
        lo = float(schema["minimum"])
    if isinstance(schema.get("maximum"), int | float):
        hi = float(schema["maximum"])
    low_open = schema.get("exclusiveMinimum")
    high_open = schema.get("exclusiveMaximum")
    step = 1.0 if integer else 1e-6
    if isinstance(low_open, int | float) and not isinstance(low_open, bool):
        lo = max(lo, float(math.floor(low_open) + 1) if integer else float(low_open) + step)
    if isinstance(high_open, int | float) and not isinstance(high_open, bool):
        hi = min(hi, float(math.ceil(high_open) - 1) if integer else float(high_open) - step)
    return lo, hi


def _number_rule(lo: float, hi: float, *, fractions: bool) -> str:
    """Return the GBNF alternatives of the numbers in [lo, hi] the grammar writes."""
    low = max(math.ceil(lo), -_LIMIT) if lo > -math.inf else -_LIMIT
    high = min(math.floor(hi), _LIMIT) if hi < math.inf else _LIMIT
    if low > high:
        raise ValueError(f"no number the grammar can write lies in [{lo}, {hi}]")
    parts = [int_range(low, high)]
    if fractions:
        # "n.d" (d not all zero, n >= 0) lies strictly between n and n + 1, and "-n.d"
        # strictly between -(n + 1) and -n: admitted where that interval is in range.
        if max(low, 0) <= high - 1:
            parts.append(f"({int_range(max(low, 0), high - 1)}) {_FRACTION}")
        if max(-high, 0) <= -low - 1:
            parts.append(f'"-" ({int_range(max(-high, 0), -low - 1)}) {_FRACTION}')
    return " | ".join(f"({p})" for p in parts)


def int_range(low: int, high: int) -> str:
    """Return GBNF alternatives matching exactly the decimal integers in [low, high]."""
    if low > high:
        raise ValueError(f"empty integer range [{low}, {high}]")
    alternatives: list[str] = []
    if low < 0:
        top = min(high, -1)
        alternatives += [f'"-" {seq}' for seq in _natural(-top, -low)]
    if high >= 0:
        alternatives += _natural(max(low, 0), high)
    return " | ".join(alternatives)


def _natural(low: int, high: int) -> list[str]:
    """The digit sequences of the integers in [low, high] (0 <= low <= high), no leading 0."""
    out: list[str] = []
    start = low
    while start <= high:
        digits = len(str(start))
        end = min(high, 10**digits - 1)
        out += _same_length(str(start), str(end))
        start = end + 1
    return out


def _same_length(low: str, high: str) -> list[str]:
    """Sequences for the numbers between `low` and `high`, both of the same length."""
    if not low:
        return [""]
    if low[0] == high[0]:
        return [_join(_digit(low[0], low[0]), rest) for rest in _same_length(low[1:], high[1:])]
    n = len(low) - 1
    out = [_join(_digit(low[0], low[0]), r) for r in _same_length(low[1:], "9" * n)]
    if int(low[0]) + 1 <= int(high[0]) - 1:
        middle = _digit(str(int(low[0]) + 1), str(int(high[0]) - 1))
        out.append(_join(middle, " ".join(["[0-9]"] * n)))
    out += [_join(_digit(high[0], high[0]), r) for r in _same_length("0" * n, high[1:])]
    return out


def _digit(a: str, b: str) -> str:
    return f'"{a}"' if a == b else f"[{a}-{b}]"


def _join(head: str, rest: str) -> str:
    return f"{head} {rest}".strip()


def bound_pattern(pattern: str, limit: int) -> str:
    """Return `pattern` with each unbounded repetition (`*`, `+`, `{m,}`) bounded by `limit`.

    A pattern of single characters and classes with one unbounded repetition, such as
    `^[A-Z][a-z]*$`, is bounded exactly (the repetition gets what the others leave).
    Repetitions inside character classes and escaped characters are left alone.
    """
    atoms = _atoms(pattern)
    if atoms is not None:
        open_ended = [a for a in atoms if a[1] in ("*", "+") or a[1].endswith(",}")]
        if len(open_ended) == 1 and all(a[1] in ("", *"*+") or a is open_ended[0] for a in atoms):
            limit = max(limit - (len(atoms) - 1), 1)
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            if pattern[i + 1 : i + 2] == "]":  # "[]...]": the "]" is a member
                out.append("]")
                i += 1
        elif ch == "*":
            out.append(f"{{0,{limit}}}")
        elif ch == "+":
            out.append(f"{{1,{limit}}}")
        elif ch == "{":
            close = pattern.find("}", i)
            body = pattern[i + 1 : close] if close > 0 else ""
            if body.endswith(",") and body[:-1].isdigit():
                out.append(f"{{{body}{max(limit, int(body[:-1]))}}}")
                i = close + 1
                continue
            out.append(ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _atoms(pattern: str) -> list[tuple[str, str]] | None:
    """Split `^...$` into (atom, quantifier) for single characters, escapes and classes;
    None when the pattern has groups, alternatives or anchors inside."""
    if not (pattern.startswith("^") and pattern.endswith("$")):
        return None
    body, atoms, i = pattern[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch in "()|^$?":
            return None
        if ch == "\\":
            atom, i = body[i : i + 2], i + 2
        elif ch == "[":
            close = body.find("]", i + 2)
            if close < 0 or "\\" in body[i:close]:
                return None
            atom, i = body[i : close + 1], close + 1
        elif ch in "*+{":
            return None
        else:
            atom, i = ch, i + 1
        quantifier = ""
        if i < len(body) and body[i] in "*+":
            quantifier, i = body[i], i + 1
        elif i < len(body) and body[i] == "{":
            close = body.find("}", i)
            if close < 0:
                return None
            quantifier, i = body[i : close + 1], close + 1
        atoms.append((atom, quantifier))
    return atoms

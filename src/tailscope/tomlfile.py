"""A TOML file a user wrote (a campaign spec, an application definition): read, parsed, and the keys of its
tables checked. Every complaint is one line, `FILE:LINE: [section.]key: what was expected`, raised as the
caller's InputError (exit 2); LINE is the line of the key (inside its `[section]` when one is named).

The file is read through userfile.py: a regular file (not a FIFO or /dev/zero) of at most MAX_BYTES. Values
are checked against a bound given by the caller (options.py's one table of the bounds the command line has
too: trials, timeout, warmup), so a file takes exactly what the command line takes.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from tailscope.errors import InputError
from tailscope.userfile import MIB, UnreadableFile, read_bytes

MAX_BYTES = 4 * MIB  # a definition or spec is a few KiB; more is not one a user wrote


def load(path: Path, what: str, error: type[InputError]) -> tuple[dict[str, Any], TomlFile]:
    """The tables of the file at `path` and the file, for its checks; `what` names it when it cannot be read
    ("the campaign spec")."""
    path = Path(path)
    try:
        raw = read_bytes(path, limit=MAX_BYTES)
    except UnreadableFile as exc:
        raise error(f"{path}: cannot read {what} ({exc.reason})") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # TOML is UTF-8: name the line of the first byte that is not
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error(f"{path}:{line}: not UTF-8 text (byte {exc.start}); TOML files are UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        number = re.search(r"line (\d+)", str(exc))
        raise error(f"{path}:{number.group(1) if number else 1}: not valid TOML ({exc})") from None
    except ValueError as exc:  # tomllib's int() of a number over Python's 4300-digit limit: no line given
        raise error(f"{path}: not a TOML file tailscope can read ({exc})") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables by recursion
        deep = "arrays or tables nested too deep"
        raise error(f"{path}: not a TOML file tailscope can read ({deep})") from None
    return data, TomlFile(path, text, error)


class Bound(Protocol):
    """A bound of options.py's table: `check(value)` returns the value or raises ValueError saying what was
    expected."""

    def check(self, value: Any) -> Any: ...


class TomlFile:
    """The text of a TOML file, to name the line of a key in its errors."""

    def __init__(self, path: Path, text: str, error: type[InputError]) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.error_type = error

    def line_of(self, section: str | None, key: str | None) -> int:
        """The line of `key = ` (inside `[section]` or `[[section]]` when given; a `[key]` header where no
        section is given), else the section's first line, else 1."""
        current: str | None = None
        first_section_line = None
        for number, raw in enumerate(self.lines, start=1):
            line = raw.strip()
            header = re.match(r"^\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?", line)
            if header:
                current = header.group(1).split(".")[0]
                if section is not None and current == section and first_section_line is None:
                    first_section_line = number
                if key is not None and section is None and current == key:
                    return number
                continue
            if key is None:
                continue
            if (section is None or current == section) and re.match(rf"^{re.escape(key)}\s*=", line):
                return number
            if (
                section is not None
                and current == section
                and re.search(rf"[{{,]\s*{re.escape(key)}\s*=", line)
            ):
                return number  # inside an inline table: options = { sums = 200 }
        return first_section_line or 1

    def error(self, section: str | None, key: str | None, message: str) -> InputError:
        label = ".".join(p for p in (section, key) if p)
        prefix = f"{label}: " if label else ""
        return self.error_type(f"{self.path}:{self.line_of(section, key)}: {prefix}{message}")

    def table(self, section: str | None) -> Table:
        """The checks of the keys of `[section]` (None: the file's top level)."""
        return Table(self, section)


class Table:
    """Checks of one table's keys and values; each failure names the file, the key's line and what was
    expected. A value that is None (the key is absent) passes unless `required`."""

    def __init__(self, file: TomlFile, section: str | None) -> None:
        self.file = file
        self.section = section

    def error(self, key: str | None, message: str) -> InputError:
        return self.file.error(self.section, key, message)

    def known(self, names: Iterable[str], keys: Sequence[str], *, what: str = "key") -> None:
        """Every one of `names` (a table's keys) is one of `keys` (listed in the error in the order given)."""
        for name in names:
            if name not in keys:
                raise self.error(name, f"unknown {what}; expected one of {', '.join(keys)}")

    def whole(
        self,
        key: str,
        value: Any,
        *,
        low: int = 1,
        high: int | None = None,
        expected: str | None = None,
        required: bool = False,
    ) -> int | None:
        """A whole number (not a boolean) in [low, high]."""
        if value is None and not required:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < low
            or (high is not None and value > high)
        ):
            if expected is None:
                bound = f">= {low}" if high is None else f"from {low} to {high}"
                expected = f"expected a whole number {bound}"
            raise self.error(key, expected)
        return value

    def bounded(self, key: str, value: Any, bound: Bound, *, required: bool = False) -> Any:
        """`value` checked by `bound` (options.py's table: the command line's own bounds), or None when the
        key is absent and not `required`."""
        if value is None and not required:
            return None
        try:
            return bound.check(value)
        except ValueError as exc:
            raise self.error(key, str(exc)) from None

    def strings(self, data: Mapping[str, Any], keys: Iterable[str]) -> None:
        """Each of `keys` that `data` gives is a non-empty string."""
        for key in keys:
            if key in data and not (isinstance(data[key], str) and data[key]):
                raise self.error(key, "expected a non-empty string")

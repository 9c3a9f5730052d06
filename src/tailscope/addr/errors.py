"""The one error class of `tailscope addr`: bad input, named by file:line where there is one (exit 2)."""

from __future__ import annotations

from tailscope.errors import InputError


class AddrInputError(InputError, ValueError):
    """Input `tailscope addr` cannot take: one line naming the file, the line and what was expected."""


class AddressRangeError(AddrInputError):
    """A physical address outside a hash's valid range; `position` is its index in the mapped array."""

    def __init__(self, message: str, position: int, address: int) -> None:
        super().__init__(message)
        self.position = position
        self.address = address

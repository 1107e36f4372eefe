"""The download's errors are importable from the package itself, and each is
a withruntime.Error, so one except clause catches every refusal."""

from __future__ import annotations

import pytest

import withruntime
from withruntime import ArchiveTooLargeError, DestinationError, UnsafeArchiveError, _archive


@pytest.mark.parametrize("cls, home", [
    (ArchiveTooLargeError, _archive.ArchiveTooLargeError),
    (DestinationError, _archive.DestinationError),
    (UnsafeArchiveError, _archive.UnsafeArchiveError),
])
def test_download_errors_exported(cls: type, home: type) -> None:
    if cls is not home:
        pytest.fail(f"withruntime.{cls.__name__}: got {cls!r}, want {home!r}")
    if not issubclass(cls, withruntime.Error):
        pytest.fail(f"{cls.__name__}: got bases {cls.__mro__}, want a withruntime.Error")
    if cls.__name__ not in withruntime.__all__:
        pytest.fail(f"{cls.__name__}: missing from withruntime.__all__")

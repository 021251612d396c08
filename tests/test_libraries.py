"""The class option ``libraries``: is the code of the standard library and of installed
packages recursed into, or run as primitives (docs/api.md, ``Context``)?"""

from __future__ import annotations

import fractions
import genericpath
import os
import posixpath
import textwrap

import pytest

import cassette_hook as ch

TEXT = "    one\n    two\n"


class Seen(ch.Context):
    operators = False

    def prehook(self, f, /, *args, **kwargs):
        self.metadata.append(f)


class SeenOutsideLibraries(Seen):
    libraries = False


class SeenInsidePosixpathOnly(Seen):
    libraries = ("posixpath",)


def dedent(text):
    return textwrap.dedent(text)


def splitext(path):
    """A library's function that calls another library's (posixpath's calls genericpath's,
    on every version; textwrap.dedent's call of re.sub went in 3.14)."""
    return os.path.splitext(path)


def _named(name, calls):
    return any(getattr(f, "__name__", None) == name for f in calls)


def third():
    return fractions.Fraction(1, 3)


def seen(cls, f, *args):
    ctx = cls([])
    result = ch.overdub(ctx, f, *args)
    return result, ctx.metadata


def test_by_default_a_librarys_function_is_recursed_into():
    result, calls = seen(Seen, splitext, "dir/name.txt")
    assert result == ("dir/name", ".txt")
    assert posixpath.splitext in calls and genericpath._splitext in calls  # inside posixpath,
    assert _named("rfind", calls)  # and genericpath


def test_without_libraries_a_librarys_function_is_seen_but_not_entered():
    result, calls = seen(SeenOutsideLibraries, dedent, TEXT)
    assert result == textwrap.dedent(TEXT)
    assert calls == [textwrap.dedent]


def test_without_libraries_a_librarys_class_is_constructed_as_a_primitive():
    result, calls = seen(SeenOutsideLibraries, third)
    assert result == fractions.Fraction(1, 3)
    assert calls == [fractions.Fraction]
    assert len(seen(Seen, third)[1]) > 1  # (its Python __new__ is entered by default)


def test_libraries_named_by_patterns_are_entered_and_no_others():
    result, calls = seen(SeenInsidePosixpathOnly, splitext, "dir/name.txt")
    assert result == ("dir/name", ".txt")
    assert posixpath.splitext in calls and genericpath._splitext in calls  # posixpath's own calls
    assert not _named("rfind", calls)  # but not genericpath._splitext's


def test_the_programs_own_functions_are_entered_without_libraries():
    def outer():
        return inner() + 1

    def inner():
        return 1

    assert seen(SeenOutsideLibraries, outer) == (2, [inner])


def test_a_bad_libraries_option_names_the_class_and_what_it_may_be():
    class Bad(ch.Context):
        libraries = "textwrap"

    with pytest.raises(TypeError, match=r"Bad.libraries must be True, False or a sequence of module patterns"):
        ch.overdub(Bad(), dedent, TEXT)

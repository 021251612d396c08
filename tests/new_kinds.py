"""Source holding each kind of argument CPython 3.14 and 3.15 added, for the tests of our
decoder (tests/test_decoding.py) and assembler (tests/test_assembly.py)."""

# Each kind of argument 3.14 and 3.15 added (docs/internals.md, "CPython 3.14", "CPython
# 3.15"), in code any Python compiles: small ints (``LOAD_SMALL_INT``), the common constants
# (``LOAD_COMMON_CONSTANT``: ``AssertionError``, the inlined ``all``/``any``/``tuple``/``list``/
# ``set``; 3.15's ``None``, ``""``, ``True``, ``False``, ``-1``), ``with`` and ``async with``
# (``LOAD_SPECIAL``), borrowed loads alone and in pairs, ``async for`` (``END_ASYNC_FOR``'s
# backward jump), iteration (3.15's ``GET_ITER`` with its argument and its cache entry) and
# imports (3.15's ``IMPORT_NAME`` with its lazy flag).
NEW_KINDS = """
def f(xs, y, m):
    import os.path
    assert xs, "empty"
    a = all(x > 1 for x in xs) or any(x < -1 for x in xs)
    b = tuple(x for x in xs), list(x for x in xs), set(x for x in xs)
    with m as n, m:
        c = (y, xs, n, 0, 7, 255, 256, -1, None, True, False, "")
    for x in xs:
        y += x
    return a, b, c, y, [x for x in xs]

async def g(m, it):
    async with m as n:
        async for x in it:
            n.append(x)
"""
NEW_OPCODES = ("LOAD_SMALL_INT", "LOAD_COMMON_CONSTANT", "LOAD_SPECIAL", "LOAD_FAST_BORROW",
               "LOAD_FAST_BORROW_LOAD_FAST_BORROW", "END_ASYNC_FOR", "GET_ITER", "IMPORT_NAME")

"""A frozen clock inside a context, and nowhere else: ``time.time`` and ``time.monotonic``
replaced for the code the context runs, whatever name it calls them by (``from time import
time`` included) and in the asyncio tasks it starts, while other code, another thread say,
sees the real clock.  ``unittest.mock.patch("time.time")`` swaps one attribute of the
module for the whole process instead, and misses an alias taken before the patch.

Each overload names its callee (``f: ch.Is[...]``), so every other call runs as under a
context that overloads nothing (docs/tutorial.md, "Which overloads are cheap")."""

import asyncio
import time
from time import time as now

import cassette_hook as ch

FROZEN = 1_700_000_000.0


class Frozen(ch.Context):
    pass


@ch.overdub.register
def _(ctx: Frozen, f: ch.Is[time.time]):
    return FROZEN


@ch.overdub.register
def _(ctx: Frozen, f: ch.Is[time.monotonic]):
    return 42.0


def stamp():
    return time.time(), now(), time.monotonic()


async def tick():
    await asyncio.sleep(0)
    return stamp()


async def in_a_task():
    return await asyncio.create_task(tick())


def program():
    return stamp(), asyncio.run(in_a_task())


print(ch.overdub(Frozen(), program))
print(stamp()[0] != FROZEN)  # outside the context: the real clock

"""Taint tracking on cassette_hook's tagging: untrusted strings are tagged with where they
came from; every string a primitive makes from tainted data is tainted too; a sink refuses
tainted data; a sanitizer clears it.

The program below is ordinary Python: it builds SQL from a request's fields with ``+``,
``%``, ``str.format``, ``join``, slicing and ``str()``.  Run under ``Taint``, the query
built from the raw field reaches ``execute_sql`` tainted and is refused, while the one
built from the escaped field goes through.

Not seen: f-strings.  ``f"...{x}..."`` compiles to the instructions FORMAT_VALUE and
BUILD_STRING, not to calls, so no context sees it, and the string it makes is not tainted
(see docs/tagging.md, "Limits").  Use ``str.format`` or ``%`` in code that must be tracked.

Run ``python examples/taint.py``.
"""

import cassette_hook as ch


class TaintError(Exception):
    """Tainted data reached a sink."""


class Taint(ch.Context):
    """A tagged value's metadata: the names of the untrusted sources it was made from."""


@ch.metadatatype.register
def _taint_is_a_set_of_sources(ctx: Taint, value: object) -> type:
    return frozenset


def sources(x, ctx):
    """The untrusted sources ``x`` was made from (looking one level into containers)."""
    if isinstance(x, (tuple, list, set, frozenset)) and not ch.istagged(x, ctx):
        return frozenset().union(*(sources(item, ctx) for item in x))
    if isinstance(x, dict) and not ch.istagged(x, ctx):
        return sources(list(x.values()), ctx)
    found = ch.metadata(x, ctx)
    return frozenset() if found is ch.NoMetaData else found


@ch.overdub.register
def _propagate(ctx: Taint, f, *args, **kwargs):
    """Every call: Python code runs as usual (taint flows through it with the values); a
    primitive runs on plain values, and a string it makes from tainted data is tainted."""
    if ch.canrecurse(ctx, f, *args, **kwargs):
        return ch.recurse(ctx, f, *args, **kwargs)
    out = ch.fallback(ctx, f, *args, **kwargs)
    taint = sources(args, ctx) | sources(kwargs, ctx)
    if taint and isinstance(out, (str, bytes)):
        return ch.tag(out, ctx, taint | sources(out, ctx))
    return out


# -- the application: a source, a sanitizer and a sink --------------------------------------

def read_request(ctx, fields):
    """The untrusted source: every field of a request is tainted with its name."""
    return {name: ch.tag(value, ctx, frozenset({f"request.{name}"})) for name, value in fields.items()}


def escape_sql(text):
    """The sanitizer: quotes doubled, so the text is safe inside '...'."""
    return text.replace("'", "''")


EXECUTED = []


def execute_sql(query):
    """The sink (a stand-in for a database call)."""
    EXECUTED.append(query)
    return len(EXECUTED)


@ch.overdub.register
def _sanitized(ctx: Taint, f: ch.Is[escape_sql], text):
    return ch.untag(ch.recurse(ctx, f, text), ctx)


@ch.overdub.register
def _sink(ctx: Taint, f: ch.Is[execute_sql], query):
    taint = sources(query, ctx)
    if taint:
        raise TaintError(f"execute_sql() got data from {', '.join(sorted(taint))}: {ch.untag(query, ctx)!r}")
    return ch.recurse(ctx, f, query)


# -- ordinary code, unaware of tainting -----------------------------------------------------

def find_user(name):
    table = "users"
    where = "name = '%s'" % name  # noqa: UP031 -- the point: % formatting is tracked
    return execute_sql("SELECT * FROM {} WHERE ".format(table) + where)  # noqa: UP032 -- and str.format


def search(words, limit):
    pattern = " OR ".join("title LIKE '%" + w[:20] + "%'" for w in words)
    return execute_sql("SELECT id FROM posts WHERE " + pattern + " LIMIT " + str(limit))


def handle(ctx, fields, *, escape):
    request = read_request(ctx, fields)
    name = request["name"]
    return find_user(escape_sql(name) if escape else name)


if __name__ == "__main__":
    ctx = ch.enabletagging(Taint(), handle)
    fields = {"name": "x' OR '1'='1"}
    print("escaped:", ch.overdub(ctx, handle, ctx, fields, escape=True), EXECUTED[-1])
    try:
        ch.overdub(ctx, handle, ctx, fields, escape=False)
    except TaintError as e:
        print("refused:", e)

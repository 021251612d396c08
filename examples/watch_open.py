"""Every ``open`` a program makes, from a ``prehook`` that names it: the file and the mode,
as the program asked.  The hook names its callees (``f: ch.Is[open, os.open]``), so the
program's other calls run as under a context that overloads nothing (docs/tutorial.md,
"Which overloads are cheap")."""

import os
import tempfile

import cassette_hook as ch


class WatchOpen(ch.Context):
    pass


@ch.prehook.register
def _(ctx: WatchOpen, f: ch.Is[open, os.open], path, *args, **kwargs):
    mode = args[0] if args else kwargs.get("mode", kwargs.get("flags", "r"))
    ctx.metadata.append((f.__name__, os.path.basename(path), mode))


def program(directory):
    path = os.path.join(directory, "notes.txt")
    with open(path, "w") as out:
        out.write("hello")
    with open(path) as back:
        text = back.read()
    os.close(os.open(path, os.O_RDONLY))
    return text.upper()


with tempfile.TemporaryDirectory() as directory:
    ctx = WatchOpen([])
    print(ch.overdub(ctx, program, directory))
    for call in ctx.metadata:
        print(call)

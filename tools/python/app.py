"""`python`: run a Python snippet in CPython inside this component.

Each call is a fresh instance of the component (the host makes one per
call), so nothing a snippet does outlives it. What a snippet may touch is
what the operator granted the tool: directories at their guest paths,
outbound HTTP to granted hosts, named environment variables, and the call's
memory, fuel and time limits. Sockets are linked but never granted; native
extension modules (``ctypes``) do not exist in a component.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import io
import json
import linecache
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Optional

# The standard library a snippet can import. componentize-py keeps only the
# modules imported while it builds the component (its build-time snapshot,
# component-init, has no files to import from later), so they are imported
# here, at the top: in the snapshot, initialised, costing a call nothing.
# A module this CPython build lacks is left out.
STDLIB = (
    "abc argparse array ast base64 binascii bisect bz2 calendar cmath codecs collections "
    "collections.abc colorsys configparser contextlib copy csv dataclasses datetime decimal "
    "difflib email email.message email.parser email.utils enum errno fnmatch fractions "
    "functools gettext glob graphlib gzip hashlib heapq hmac html html.parser http "
    "http.client inspect io ipaddress itertools json keyword locale logging lzma math "
    "mimetypes numbers operator os os.path pathlib pprint queue quopri random re reprlib "
    "sched secrets shlex shutil socket sqlite3 stat statistics string struct tarfile "
    "tempfile textwrap time timeit tomllib traceback types typing unicodedata urllib "
    "urllib.error urllib.parse urllib.request uuid warnings weakref xml xml.dom.minidom "
    "xml.etree.ElementTree zipfile zlib zoneinfo encodings.ascii encodings.base64_codec "
    "encodings.cp1252 encodings.hex_codec encodings.idna encodings.latin_1 encodings.punycode "
    "encodings.raw_unicode_escape encodings.unicode_escape encodings.utf_16 encodings.utf_32 "
    "encodings.utf_8_sig"
).split()
for _name in STDLIB:
    try:
        importlib.import_module(_name)
    except ImportError:
        pass

# Outbound HTTP to granted hosts: CPython's own clients open sockets, which
# the host refuses; snippets use `from longhand_tool.http import fetch`.
import longhand_tool.http  # noqa: F401
from longhand_tool import Effect, Failed, export, tool

# The name a snippet's code has in tracebacks.
SNIPPET = "<snippet>"
# Output kept per stream; past it the text is cut and says so.
MAX_STREAM = 256 * 1024


@dataclass
class Run:
    """A Python snippet to run."""

    code: str
    stdin: Optional[str] = None


def _kept(text: str) -> str:
    if len(text) <= MAX_STREAM:
        return text
    return text[:MAX_STREAM] + f"\n[{len(text) - MAX_STREAM} more characters cut]\n"


def _value(value: Any) -> Any:
    """The final expression's value as JSON when it is JSON, else its repr."""
    if value is None:
        return None
    try:
        json.dumps(value, allow_nan=False)
        return value
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _traceback(error: BaseException) -> str:
    """The traceback from the snippet's first frame on: the tool's own
    frames are not the model's concern."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != SNIPPET:
        tb = tb.tb_next
    if tb is None and not isinstance(error, SyntaxError):
        tb = error.__traceback__
    return "".join(traceback.format_exception(type(error), error, tb))


@tool(effect=Effect.WRITES)
def run(input: Run) -> dict:
    """Run Python 3 code (CPython, standard library) in a fresh sandbox and
    return its stdout, stderr and, like a REPL, the value of its last line
    if that is an expression (JSON when it is JSON, else its repr). Files are
    only those in granted directories. HTTP only to granted hosts, with
    `from longhand_tool.http import fetch` (`fetch(url, method=, headers=,
    body=)` returns `.status`, `.text()`, `.json()`); urllib and sockets are
    refused. No subprocesses or native modules. An exception fails the call
    with its traceback."""
    linecache.cache[SNIPPET] = (len(input.code), None, input.code.splitlines(True), SNIPPET)
    out, err = io.StringIO(), io.StringIO()
    scope: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    sys.stdin = io.StringIO(input.stdin or "")
    value = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            tree = ast.parse(input.code, SNIPPET, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, SNIPPET, "exec"), scope)
            if last is not None:
                value = eval(compile(last, SNIPPET, "eval"), scope)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise Failed(_failure(f"SystemExit: {e.code}\n", out, err)) from None
    except BaseException as e:  # the snippet's, whatever it is: a value, never a trap
        raise Failed(_failure(_traceback(e), out, err)) from None
    return {"stdout": _kept(out.getvalue()), "stderr": _kept(err.getvalue()), "value": _value(value)}


def _failure(what: str, out: io.StringIO, err: io.StringIO) -> str:
    text = what
    for name, stream in (("stdout", out), ("stderr", err)):
        if stream.getvalue():
            text += f"\n{name} before the error:\n{_kept(stream.getvalue())}"
    return text


# componentize-py exports the class bound to this name as `longhand:tool/tools`.
Tools = export(
    name="python",
    version="0.1.0",
    description="Runs Python snippets in CPython, sandboxed to the tool's grants.",
)

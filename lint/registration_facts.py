"""Files that register delayed-wgrad pieces on instances from outside their class (issue
#19, class 6, registrations done from outside the class).

A class's ``backward_dw`` is written against the layers its own construction builds. Code
outside the class can change what it must cover: a factory that hangs one more delayed
layer on an instance (``mlp.lora_proj = TELinear(..., delay_wgrad_compute=...)``), a setup
pass that switches delayed wgrad on for every instance of a class
(``module.delay_wgrad_compute = True``), or a schedule that replaces an instance's
``backward_dw`` with a wrapper (``layer.backward_dw = timed``). Judging these needs the
class's summary, and the class usually sits in another file, so such a file is given the
summaries of the classes of other files it names (``class_facts``), as a subclass file is
given its bases'. Found by a look at the text, so it costs nothing on other files; it may
say yes where the rule later finds nothing, never no where it finds something.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# An attribute of something other than ``self`` given a backward_dw or a delay mode (the
# receiver is checked after the match: a look-behind on every dot would be slow), a built
# layer (anchored at a line's start: cheap on large files), or the same through ``setattr``.
_PROTOCOL_SET = re.compile(rb"\.[ \t]*(?:backward_dw|delay_wgrad_compute)[ \t]*=(?!=)")
_LAYER_SET = re.compile(
    rb"(?m)^[ \t]*(?!self\.)[A-Za-z_]\w*\.\w+[ \t]*=[ \t]*[\w.]*(?:Linear|build_module)"
)
_SETATTR = re.compile(rb"setattr\(\s*(?!self\b)\w+\s*,\s*['\"](?:backward_dw|delay_wgrad_compute)")
# Where a class is named as the type of an instance: a call, ``isinstance`` or an annotation.
_CLASS_USE = re.compile(rb"\b([A-Z]\w*)\s*\(|isinstance\(\s*\w+\s*,\s*([A-Z]\w*)|:\s*([A-Z]\w*)")


def registers(data: bytes) -> bool:
    """The file may register a layer, a delay mode or a ``backward_dw`` from outside."""
    if b"backward_dw" not in data and b"delay_wgrad_compute" not in data:
        return False
    if any(
        data[max(0, m.start() - 4) : m.start()] != b"self" for m in _PROTOCOL_SET.finditer(data)
    ):
        return True
    return bool(_LAYER_SET.search(data)) or (b"setattr(" in data and bool(_SETATTR.search(data)))


def registered_classes(
    files: Iterable[tuple[str, bytes]], headers: dict[str, list[tuple[str, list[str]]]]
) -> dict[str, dict[str, str]]:
    """For each registering file: the top-level classes of other files it names as the type
    of an instance (name -> the one file that defines it; a name two files define is
    unknown to the class model anyway)."""
    defined: dict[str, set[str]] = {}
    for path, found in headers.items():
        for name, _ in found:
            defined.setdefault(name, set()).add(path)
    found_by_path: dict[str, dict[str, str]] = {}
    for path, data in files:
        if not registers(data):
            continue
        named = {word.decode() for match in _CLASS_USE.findall(data) for word in match if word}
        own = {name for name, _ in headers.get(path, ())}
        chosen = {
            name: next(iter(defined[name]))
            for name in sorted(named - own)
            if len(defined.get(name, ())) == 1 and path not in defined[name]
        }
        if chosen:
            found_by_path[path] = chosen
    return found_by_path

"""A small grammar check of our own for Mermaid sequence diagrams, written from Mermaid's syntax
(mermaid.js.org, "Sequence diagrams"), not from our writer: the statements, the arrows, and the text
rules that break a diagram when broken (a ``;`` or ``#`` in text ends the statement or starts an entity;
entity codes ``#59;`` and the ``<br/>`` line break are the ways around).

``parse(markdown)`` finds the one ```mermaid block and returns its statements as tuples:
``("participant", id, label)``, ``("message", src, arrow, dst, text)``, ``("note", placement, ids, text)``;
any line it cannot read is an AssertionError naming the line.
"""

from __future__ import annotations

import re

ID = r"[A-Za-z_][A-Za-z0-9_]*"
ARROWS = ("-->>", "->>", "--x", "-x", "--)", "-)", "-->", "->")  # longest first
ENTITY = re.compile(r"#(?:[0-9]+|[A-Za-z]+);")
BLOCKS = ("loop", "alt", "opt", "par", "rect", "critical", "break")

_PARTICIPANT = re.compile(rf"^(participant|actor)\s+({ID})(?:\s+as\s+(.+))?$")
_MESSAGE = re.compile(rf"^({ID})({'|'.join(re.escape(a) for a in ARROWS)})([+-]?)({ID})\s*:(.*)$")
_NOTE = re.compile(rf"^Note\s+(over|left of|right of)\s+({ID})(?:\s*,\s*({ID}))?\s*:(.*)$")


def _text(text: str, where: str, *, breaks: bool) -> str:
    """Check a message's or note's text; returns it with entities and line breaks decoded."""
    plain = ENTITY.sub("\x00", text)
    if breaks:
        plain = plain.replace("<br/>", "\x01")
    for bad in (";", "#", "\n"):
        assert bad not in plain, f"{where}: {bad!r} in text {text!r} (ends the statement or starts an entity)"
    if breaks:
        assert "<" not in plain and ">" not in plain, f"{where}: raw '<' or '>' in note text {text!r}"
    assert plain.strip(), f"{where}: empty text"
    return text


def mermaid_block(markdown: str) -> list[str]:
    blocks = re.findall(r"^```mermaid\n(.*?)^```$", markdown, flags=re.S | re.M)
    assert len(blocks) == 1, f"expected one ```mermaid block, found {len(blocks)}"
    return blocks[0].splitlines()


def parse(markdown: str) -> list[tuple]:
    lines = mermaid_block(markdown)
    body = [(n, line.strip()) for n, line in enumerate(lines, start=1) if line.strip()]
    assert body and body[0][1] == "sequenceDiagram", "the block must begin with sequenceDiagram"
    declared: set[str] = set()
    depth = 0
    out: list[tuple] = []
    for n, line in body[1:]:
        where = f"mermaid line {n}"
        if line.startswith("%%"):
            continue
        if m := _PARTICIPANT.match(line):
            assert m.group(2) not in declared, f"{where}: participant {m.group(2)} declared twice"
            label = m.group(3) or m.group(2)
            assert ";" not in ENTITY.sub("", label) and "#" not in ENTITY.sub("", label), f"{where}: bad label"
            declared.add(m.group(2))
            out.append(("participant", m.group(2), label.strip()))
        elif m := _MESSAGE.match(line):
            src, arrow, _, dst, text = m.groups()
            for who in (src, dst):
                assert who in declared, f"{where}: {who} is not a declared participant"
            out.append(("message", src, arrow, dst, _text(text.strip(), where, breaks=False)))
        elif m := _NOTE.match(line):
            placement, first, second, text = m.groups()
            for who in (first, second):
                assert who is None or who in declared, f"{where}: {who} is not a declared participant"
            ids = (first,) if second is None else (first, second)
            out.append(("note", placement, ids, _text(text.strip(), where, breaks=True)))
        elif line.split(" ", 1)[0] in BLOCKS:
            depth += 1
        elif line == "end":
            depth -= 1
            assert depth >= 0, f"{where}: 'end' without a block"
        elif line == "autonumber":
            continue
        else:
            raise AssertionError(f"{where}: not a sequence diagram statement: {line!r}")
    assert depth == 0, "a block is not closed with 'end'"
    return out


def decode(text: str) -> str:
    """Text as a reader sees it: entity codes made characters again, line breaks as newlines."""
    def one(m):
        code = m.group(0)[1:-1]
        if code.isdigit():
            return chr(int(code))
        return {"lt": "<", "gt": ">", "quot": '"', "amp": "&"}.get(code, m.group(0))
    return ENTITY.sub(one, text.replace("<br/>", "\n"))

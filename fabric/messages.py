"""Message kinds: attrs frozen classes registered under a stable tag, encoded without pickle.

``@message("gm.launch")`` makes a class a frozen, slotted attrs class and registers it, so the journal
can write it as ``[tag, (field, ...)]`` and replay can rebuild it. Field values must be plain data
(int, float, str, bytes, bool, None, tuples/lists of those) or other registered classes.

A kind registers when its module is imported, and a run imports only its own scheduler's actors. So the first
time a tag is looked up and not found, ``import_kinds`` (set by the actors' registry to import every
scheduler's modules) is called, once, and the tag looked up again: a journal of any scheduler reads the same
in any process.
"""

from __future__ import annotations

import operator

import attrs
import msgpack

from .errors import JournalError

_BY_TAG: dict[str, type] = {}
NESTED_EXT = 1  # the ext code of a message nested in a field
import_kinds = None  # a callable that imports the modules defining the kinds not imported yet (see above)


def _kind(tag: str) -> type | None:
    """The class registered under ``tag``; None if none is, even once every kind is imported."""
    global import_kinds
    cls = _BY_TAG.get(tag)
    if cls is None and import_kinds is not None:
        load, import_kinds = import_kinds, None
        load()
        cls = _BY_TAG.get(tag)
    return cls


def register(cls: type, tag: str) -> type:
    """Register an attrs class under ``tag`` (unique); returns the class."""
    if not attrs.has(cls):
        raise TypeError(f"{cls.__name__} is not an attrs class")
    old = _BY_TAG.get(tag)
    if old is not None and old.__qualname__ != cls.__qualname__:
        raise ValueError(f"message tag {tag!r} is taken by {old.__qualname__}")
    names = tuple(f.name for f in attrs.fields(cls))
    if len(names) == 0:
        getter = lambda _m: ()  # noqa: E731
    elif len(names) == 1:
        one = operator.attrgetter(names[0])
        getter = lambda m: (one(m),)  # noqa: E731
    else:
        getter = operator.attrgetter(*names)
    cls._fedemu_tag = tag
    cls._fedemu_fields = staticmethod(getter)
    _BY_TAG[tag] = cls
    return cls


def message(tag: str):
    """Class decorator: a frozen slotted attrs message registered under ``tag``."""

    def wrap(cls):
        if not attrs.has(cls):
            cls = attrs.frozen(slots=True)(cls)
        return register(cls, tag)

    return wrap


def lean(cls=None, *, last: int | None = None):
    """Journal a message's trailing fields only when they differ from their defaults: fields added later
    (Megha's users) are absent from runs that do not use them, which keep their bytes (digests). The
    trailing fields are those from the first with a default, or the ``last`` ones (``@lean(last=3)``)."""
    if cls is None:
        return lambda c: lean(c, last=last)
    full = cls._fedemu_fields
    names = [f.name for f in attrs.fields(cls)]
    defaults = [f.default for f in attrs.fields(cls)]
    first = len(names) - last if last is not None else \
        next(i for i, d in enumerate(defaults) if d is not attrs.NOTHING)
    trailing = tuple(defaults[first:])
    trail = _getter(names[first:])
    head = _getter(names[:first])
    if len(trailing) == 1:  # one trailing field (the usual case): no tuple to build and compare
        last, default = operator.attrgetter(names[first]), trailing[0]

        def fields_one(msg):
            return head(msg) if last(msg) == default else full(msg)
        cls._fedemu_fields = staticmethod(fields_one)
        return cls

    def fields(msg):
        if trail(msg) == trailing:  # the common case: every trailing field at its default
            return head(msg)
        out = full(msg)
        end = len(out)
        while end > first and out[end - 1] == defaults[end - 1]:
            end -= 1
        return out if end == len(out) else out[:end]
    cls._fedemu_fields = staticmethod(fields)
    return cls


def _getter(names):
    """A function giving the tuple of the named attributes (attrgetter gives a bare value for one name)."""
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda m: (one(m),)
    return operator.attrgetter(*names) if names else (lambda _m: ())


def tag_of(msg) -> str:
    return msg._fedemu_tag


def encode(msg):
    """``[tag, fields]`` for a registered message (fields as a tuple, nested kinds kept as objects)."""
    return (msg._fedemu_tag, msg._fedemu_fields(msg))


def _default(obj):
    """msgpack hook: nested registered messages become ext records; numpy scalars become Python numbers."""
    tag = getattr(obj, "_fedemu_tag", None)
    if tag is not None:
        return msgpack.ExtType(NESTED_EXT, msgpack.packb((tag, obj._fedemu_fields(obj)), default=_default))
    if isinstance(obj, (frozenset, set)):
        return sorted(obj)
    item = getattr(obj, "item", None)  # numpy scalar
    if item is not None:
        return item()
    raise TypeError(f"cannot journal a value of type {type(obj).__name__}: {obj!r}")


@attrs.frozen
class Unregistered:
    """A nested message whose kind is not registered in this process (a user's scenario that replay did
    not import): its tag and fields as recorded. It compares equal to the same record read again."""

    tag: str
    fields: tuple


def _ext_hook(code, data):
    if code == NESTED_EXT:  # ``unpackb`` bounds every length by the ext's own bytes
        tag, fields = msgpack.unpackb(data, use_list=False, ext_hook=_ext_hook, raw=False, strict_map_key=False)
        if not isinstance(tag, str) or not isinstance(fields, tuple):
            raise ValueError(f"a nested message is [tag, fields], got {tag!r:.60}, {fields!r:.60}")
        cls = _kind(tag)
        return Unregistered(tag, fields) if cls is None else cls(*fields)
    return msgpack.ExtType(code, data)


def decode(tag: str, fields):
    """Rebuild a registered message from its tag and field tuple."""
    cls = _kind(tag)
    if cls is None:
        raise JournalError(f"unknown message tag {tag!r}; known: {', '.join(sorted(_BY_TAG)) or '(none)'}")
    return cls(*fields)


def new_packer() -> msgpack.Packer:
    """A reusable packer that understands registered messages (autoreset off: caller drains it)."""
    return msgpack.Packer(default=_default, autoreset=False, use_bin_type=True)


def packb(obj) -> bytes:
    """Pack one object on its own (headers, footers)."""
    return msgpack.packb(obj, default=_default, use_bin_type=True)


def new_unpacker(limit: int) -> msgpack.Unpacker:
    """An unpacker for at most ``limit`` bytes: no string, array, map or ext it reads may claim more
    items or bytes than that, so a damaged length is refused before anything is allocated for it."""
    return msgpack.Unpacker(use_list=False, ext_hook=_ext_hook, raw=False, strict_map_key=False,
                            max_buffer_size=limit, max_str_len=limit, max_bin_len=limit, max_array_len=limit,
                            max_map_len=limit, max_ext_len=limit)

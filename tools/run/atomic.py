"""The safe writer, for the tools: it lives in ``fabric.atomic`` (the journal and the event log use it too)."""

from fedemu.fabric.atomic import STDOUT, PendingFile, atomic_write, check_target, write_bytes, write_json, write_text

__all__ = ["STDOUT", "PendingFile", "atomic_write", "check_target", "write_bytes", "write_json", "write_text"]

"""LoomError: a failed Loom call, with its code, loom_strerror()'s sentence and the node's message."""

from . import _capi

# The LOOM_E* codes of include/loom/error.h, in the enum's order (checked by
# tests/python/test_library.py against the C compiler's values).
CODE_NAMES = (
    "LOOM_OK",
    "LOOM_EINVAL",
    "LOOM_ENOMEM",
    "LOOM_ECONFIG",
    "LOOM_ETRANSPORT",
    "LOOM_ETIMEDOUT",
    "LOOM_EPEERFAIL",
    "LOOM_ESHUTDOWN",
    "LOOM_EMISMATCH",
    "LOOM_ENOTFOUND",
    "LOOM_EROLE",
    "LOOM_EKEYRANGE",
    "LOOM_EPROTO",
    "LOOM_ELIMIT",
    "LOOM_ESTATE",
    "LOOM_EIO",
)


class LoomError(Exception):
    """A Loom function returned an error code.

    code      the LOOM_E* number (loom.EKEYRANGE, ...)
    name      its name, "LOOM_EKEYRANGE"
    strerror  loom_strerror(code): "key outside the table's key range"
    detail    what the node reported about this failure (loom_last_error()), or what the
              binding knows (the offending key); "" if nothing more is known
    call      the C function that failed, "loom_pull"
    """

    def __init__(self, code, detail="", call=""):
        self.code = code
        self.name = CODE_NAMES[code] if 0 <= code < len(CODE_NAMES) else f"LOOM_E{code}"
        self.strerror = _capi.lib.loom_strerror(code).decode()
        self.detail = detail
        self.call = call
        text = f"{call}: " if call else ""
        text += f"{self.strerror} ({self.name})"
        if detail:
            text += f": {detail}"
        super().__init__(text)


LoomError.__module__ = "loom"  # tracebacks say loom.LoomError, the name users catch


def call(fn, *args, detail=None):
    """Call the C function fn; raise LoomError if it returns an error code.

    The message is what the node logged on this thread during the call, else detail(rc) if
    given (the binding's own explanation), else nothing beyond the code's sentence."""
    _capi.lib.loom_clear_last_error()
    rc = fn(*args)
    if rc:
        raise LoomError(rc, _message(rc, detail), fn.__name__)
    return rc


def _message(rc, detail):
    logged = _capi.lib.loom_last_error().decode(errors="replace")
    if logged:
        return logged
    return detail(rc) if detail else ""

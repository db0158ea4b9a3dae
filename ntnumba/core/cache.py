"""Faults of numba's on-disk cache: a full or unwritable cache never fails a fit.

numba writes a kernel's cache files (``cache=True``) inside the call that compiled it.
:func:`guard` wraps the cache of every kernel of a module: an ``OSError`` while saving or loading
turns the on-disk cache off for the process (as ``NTNUMBA_CACHE=0``) with one ``RuntimeWarning``
naming the directory, the error and the fix; no writable cache location at all gets the same
warning once at import. A damaged cache file is compiled again: the kernel's index is reset
(numba's ``Cache.flush``) so the fresh compilation replaces it, with one ``RuntimeWarning``.
Measured cases: ``docs/reliability.md``, "Faults of the environment".
"""
import threading
import warnings

from .validation import user_stacklevel

_LOCK = threading.Lock()
_STATE = {"warned": False, "damaged": False}
_GUARDED = []  # the dispatchers whose cache is guarded


def _warn_once(kind, path, what):
    """One RuntimeWarning per process and ``kind``: "ntnumba: numba's cache ... ``what``"."""
    with _LOCK:
        if _STATE[kind]:
            return
        _STATE[kind] = True
    where = f"numba's cache directory {path}" if path else "numba's cache"
    warnings.warn(f"ntnumba: {where} {what}", RuntimeWarning, stacklevel=user_stacklevel())


def warn_unusable(path, reason):
    """One RuntimeWarning per process: the on-disk cache is not used, why, and the fix."""
    _warn_once("warned", path, (
        f"cannot be used ({reason}): the compiled kernels are kept in memory for this process "
        "only, and every new process compiles them again (about 16-40 s). Fix: free space "
        "there or point NUMBA_CACHE_DIR at a writable directory; NTNUMBA_CACHE=0 turns the "
        "cache off without this warning."))


def warn_damaged(path, reason):
    """One RuntimeWarning per process: a damaged cache file, compiled again and rewritten."""
    _warn_once("damaged", path, (
        f"holds a damaged file ({reason}): the kernels concerned are compiled again (about "
        "16-40 s in all) and their cache entries rewritten. If this warning comes back in "
        "every new process, delete that directory."))


def _repair(exc, cache):
    """A cache entry that cannot be loaded (truncated or corrupted file): reset the kernel's
    index so that the compilation that follows is saved afresh, and say so once."""
    flush = getattr(cache, "flush", None)
    try:
        if flush is not None:
            flush()
    except OSError as err:     # cannot even rewrite the index: memory only, as for a full disk
        _disable(err, cache)
        return
    warn_damaged(getattr(cache, "_cache_path", None), f"{type(exc).__name__}: {exc}")


def _disable(exc, cache):
    """Turn the on-disk cache off for every guarded kernel, with one warning."""
    from numba.core.caching import NullCache
    path = getattr(cache, "_cache_path", None)
    with _LOCK:
        dispatchers = list(_GUARDED)
    for disp in dispatchers:
        disp._cache = NullCache()
    warn_unusable(path, f"{type(exc).__name__}: {exc}")


def _guard_one(disp):
    cache = getattr(disp, "_cache", None)
    if cache is None or getattr(cache, "ntnumba_guarded", False) or (
            type(cache).__name__ == "NullCache"):
        return False
    save, load = cache.save_overload, cache.load_overload

    def save_overload(sig, data):
        try:
            save(sig, data)
        except OSError as exc:  # ENOSPC, EROFS, EACCES, EDQUOT ...: keep the compiled kernel
            _disable(exc, cache)

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except OSError as exc:  # unreadable cache: compile instead
            _disable(exc, cache)
            return None
        except Exception as exc:  # noqa: BLE001 - a damaged file (pickle, EOF ...): compile
            _repair(exc, cache)
            return None

    cache.save_overload = save_overload
    cache.load_overload = load_overload
    cache.ntnumba_guarded = True
    with _LOCK:
        _GUARDED.append(disp)
    return True


def guard(*modules):
    """Guard the on-disk cache of every numba kernel defined in ``modules``; returns how many
    kernels were guarded."""
    from numba.core.dispatcher import Dispatcher
    count = 0
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, Dispatcher):
                count += _guard_one(value)
    return count

"""The registry of installed backends: the built-in host target plus every `ave.backends` entry point."""
from __future__ import annotations

from importlib.metadata import entry_points

from ..lang.errors import UsageError
from .backend import Backend

ENTRY_POINT_GROUP = "ave.backends"


def load_backends() -> tuple[dict[str, Backend], dict[str, str]]:
    """Installed backends by name (the built-in host target first) and entry points that failed
    to load, with why (a broken plug-in never hides the others)."""
    from .host_backend import HostBackend

    found: dict[str, Backend] = {"host": HostBackend()}
    broken: dict[str, str] = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if ep.name in found:
            continue
        try:
            obj = ep.load()
            backend = obj() if isinstance(obj, type) else obj
        except Exception as exc:  # noqa: BLE001  (a third-party plug-in may fail in any way)
            broken[ep.name] = f"{type(exc).__name__}: {exc}"
            continue
        if not isinstance(backend, Backend):
            broken[ep.name] = "the entry point is not an ave_decl.codegen.Backend"
            continue
        found[ep.name] = backend
    return found, broken


def get_backend(name: str) -> Backend:
    found, broken = load_backends()
    if name in found:
        return found[name]
    if name in broken:
        raise UsageError(f"backend {name} is installed but failed to load: {broken[name]}")
    raise UsageError(f"no backend named {name} (installed: {', '.join(sorted(found))}; see docs/backends.md)")

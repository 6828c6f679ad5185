"""The plugin manager: loads the ``llm_gym`` entry-point group lazily and keeps what failed to load.

Nothing is loaded at import time. :func:`get_plugin_manager` loads every entry point once; one that fails to import
(or registers a broken hook) is recorded in :func:`plugin_failures` and skipped, so the rest keep working.

"Fails" includes ``sys.exit()``, a ``KeyboardInterrupt`` the plugin raises itself and any other ``BaseException``
(:func:`call_plugin`): a plugin must not decide the exit code of ``llm-gym --version``. A real Ctrl-C while a plugin
loads still stops the command.
"""

from __future__ import annotations

import functools
import importlib.metadata
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pluggy

from llm_gym import hookspecs
from llm_gym.errors import UnknownNameError

if TYPE_CHECKING:
    from llm_gym.agent import Agent

ENTRY_POINT_GROUP = "llm_gym"


@dataclass(frozen=True)
class PluginInfo:
    """One entry point of the ``llm_gym`` group and how loading it went."""

    name: str
    distribution: str
    value: str
    error: str | None = None

    @property
    def loaded(self) -> bool:
        return self.error is None


_loaded: list[PluginInfo] = []
command_conflicts: list[str] = []
"""Commands a plugin's ``register_commands`` added under a taken name (ignored); filled by the CLI's app."""


def call_plugin(function: Callable[..., Any], *args: Any, **kwargs: Any) -> str | None:
    """Call plugin code; None when it returned, else what it raised as one line (``SystemExit: 3``).

    Every ``BaseException`` counts as a failure of the plugin, except a ``KeyboardInterrupt`` that comes from a real
    SIGINT (the user pressing Ctrl-C meanwhile): that one is raised on, so the command stops.
    """
    interrupted: list[bool] = []
    watching = threading.current_thread() is threading.main_thread()  # only the main thread gets SIGINT
    if watching:
        default = signal.getsignal(signal.SIGINT)

        def on_sigint(signum: int, frame: Any) -> None:
            interrupted.append(True)
            if default is signal.SIG_IGN:
                return
            if callable(default):
                default(signum, frame)  # Python's own handler raises KeyboardInterrupt
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, on_sigint)
    try:
        function(*args, **kwargs)
    except KeyboardInterrupt as exc:
        if interrupted:
            raise
        return _describe(exc)
    except BaseException as exc:  # SystemExit, GeneratorExit, a plugin's own BaseException subclass
        return _describe(exc)
    finally:
        if watching:
            signal.signal(signal.SIGINT, default)
    return None


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@functools.cache
def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager with every loadable ``llm_gym`` entry point registered."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    # llm-gym's own plugins load first, so a third-party agent cannot silently take a built-in name.
    entry_points = sorted(
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
        key=lambda ep: (ep.dist is None or ep.dist.name != "llm-gym", ep.name),
    )
    for entry_point in entry_points:
        distribution = entry_point.dist.name if entry_point.dist else "?"
        loaded: list[Any] = []

        def load(entry_point: importlib.metadata.EntryPoint = entry_point, loaded: list[Any] = loaded) -> None:
            loaded.append(entry_point.load())
            manager.register(loaded[0], name=entry_point.name)
            manager.check_pending()

        error = call_plugin(load)  # a broken plugin must not take the others down
        if error is not None and loaded and manager.is_registered(loaded[0]):
            manager.unregister(loaded[0])
        _loaded.append(PluginInfo(entry_point.name, distribution, entry_point.value, error))
    return manager


def reset_plugin_manager() -> None:
    """Forget the loaded plugins (tests use this after installing a plugin in a fixture)."""
    get_plugin_manager.cache_clear()
    _loaded.clear()
    agent_registry.cache_clear()
    backend_registry.cache_clear()


def plugins() -> list[PluginInfo]:
    """Every entry point seen, loaded or not."""
    get_plugin_manager()
    return list(_loaded)


def plugin_failures() -> list[str]:
    """One line per plugin or registration that failed."""
    get_plugin_manager()
    lines = [f"plugin {p.name!r} from {p.distribution}: {p.error}" for p in _loaded if p.error]
    return lines + list(agent_registry().conflicts) + list(backend_registry().conflicts) + list(command_conflicts)


@dataclass
class _Registry:
    items: dict[str, Any]
    owners: dict[str, str]
    conflicts: list[str]


def _collect(hook_name: str, key: Callable[..., tuple[str, Any]]) -> _Registry:
    manager = get_plugin_manager()
    registry = _Registry({}, {}, [])
    # Plugins register in load order (built-ins first within their distribution), so the first name wins.
    order = [p.name for p in _loaded if p.loaded]
    impls = sorted(
        getattr(manager.hook, hook_name).get_hookimpls(),
        key=lambda impl: order.index(name) if (name := manager.get_name(impl.plugin)) in order else len(order),
    )
    for impl in impls:
        owner = manager.get_name(impl.plugin) or "?"

        def register(*args: Any, _owner: str = owner) -> None:
            name, item = key(*args)
            if name in registry.items:
                registry.conflicts.append(
                    f"{hook_name}: {name!r} from plugin {_owner!r} ignored; plugin {registry.owners[name]!r} has it"
                )
                return
            registry.items[name], registry.owners[name] = item, _owner

        error = call_plugin(impl.function, register)
        if error is not None:
            registry.conflicts.append(f"{hook_name} of plugin {owner!r} failed: {error}")
    return registry


@functools.cache
def agent_registry() -> _Registry:
    """Agents by name, from every plugin's ``register_agents``."""
    return _collect("register_agents", lambda cls: (cls.name, cls))


@functools.cache
def backend_registry() -> _Registry:
    """LM backend factories by name, from every plugin's ``register_backends``."""
    return _collect("register_backends", lambda name, factory: (name, factory))


def agents() -> dict[str, type[Agent]]:
    """Agent classes by name."""
    return dict(agent_registry().items)


def get_agent(name: str) -> type[Agent]:
    """The agent class called ``name``; unknown names raise with the closest matches."""
    found = agent_registry().items.get(name)
    if found is None:
        raise UnknownNameError("agent", name, agent_registry().items, hint="Run `llm-gym agents` to list them.")
    return found


def get_backend(name: str) -> Callable[..., Any]:
    """The LM backend factory called ``name``; unknown names raise with the closest matches."""
    found = backend_registry().items.get(name)
    if found is None:
        raise UnknownNameError("backend", name, backend_registry().items)
    return found


def agent_owner(name: str) -> str:
    """The entry-point name of the plugin that registered agent ``name``."""
    return agent_registry().owners.get(name, "?")

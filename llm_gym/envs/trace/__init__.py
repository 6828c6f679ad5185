"""Trace-v0: predict the exact stdout of a Python program that carries injected ``__DBG_N__`` prints.

Modules: :mod:`generator` (procedural programs by level), :mod:`inject` (debug-print injection on the AST),
:mod:`sandbox` (the fork-server sandbox and its fresh-interpreter reference; :mod:`confine`, :mod:`child`,
:mod:`supervise` and :mod:`server` are its standard-library-only parts), :mod:`scoring`, :mod:`tasks` (task sources
and the ground-truth cache) and :mod:`env` (the Gymnasium env).
"""

"""Trace-v0: predict the exact stdout of a Python program that carries injected ``__DBG_N__`` prints.

Modules:

* :mod:`generator` with :mod:`snippets_basic` and :mod:`snippets_advanced`: procedural programs by level;
* :mod:`inject`: debug-print injection guided by the AST;
* :mod:`sandbox`: the fork-server sandbox and its fresh-interpreter reference, built from the standard-library-only
  :mod:`confine`, :mod:`child`, :mod:`supervise`, :mod:`server` and :mod:`zygote`;
* :mod:`scoring`; :mod:`tasks` (task sources and the ground-truth cache); :mod:`env` (the Gymnasium env).
"""
